"""Errors raised on bad TrackML input."""

from __future__ import annotations


class TrackMLFormatError(ValueError):
    """An event file is malformed; the message names the file, column, line and value."""


class EventFileNotFoundError(TrackMLFormatError, FileNotFoundError):
    """An event part (e.g. ``event000001000-hits.csv``) does not exist."""
