"""Metric-learning embedding of hits and neighbour-graph construction (pipeline stage 1)."""
