"""Errors of the Kueue model."""

from __future__ import annotations


class ModelError(ValueError):
    """Invalid input for the model; the message names the object and the field."""
