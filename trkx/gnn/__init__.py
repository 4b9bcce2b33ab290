"""Interaction-network GNN edge classifier with sparse-matrix aggregation (pipeline stage 3)."""
