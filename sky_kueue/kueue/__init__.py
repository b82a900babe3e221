"""kueue"""
