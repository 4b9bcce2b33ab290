"""What the filter and the GNN both know about a candidate edge: its geometry and trajectory
(geometry), the along-track agreement of its continuations (agreement, agreement_kernels), the
weighted loss (loss), the figures every stage reports (figures) and the working point chosen on
validation events (working_point)."""
