"""TrackML data: I/O, detector geometry, features, truth and the event record."""
