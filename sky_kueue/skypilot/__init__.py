"""skypilot"""
