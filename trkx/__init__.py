"""trkx: GNN particle-track reconstruction for TrackML-format events."""

__version__ = "0.3.0"
