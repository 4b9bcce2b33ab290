"""Track building, matching, metrics and the TrackML score (pipeline stage 4)."""
