"""Choosing the track builder's working point on validation events."""
