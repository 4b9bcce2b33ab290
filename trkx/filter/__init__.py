"""MLP edge filter over candidate edges (pipeline stage 2)."""
