"""trkx's own file formats and how they are written: model checkpoints (checkpoint), atomic
writes and ``weights_only`` tensor files (atomic), and the errors of bad input (errors)."""
