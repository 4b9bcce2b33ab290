"""The pipeline's stage names, defined once: what every layer names its configs, checkpoints and
folders by."""

#: The learned stages, in pipeline order: the names of their configs, checkpoints
#: (``embedding.pt``, ...), graph folders and ``trkx train`` / ``trkx infer`` subcommands.
LEARNED_STAGES: tuple[str, ...] = ("embedding", "filter", "gnn")
#: The tuned track builder's file in a checkpoint folder or shipped set (``trkx tune-tracks``,
#: trkx.tracks.stage_config), beside the learned stages' checkpoints.
TUNED_TRACKS = "tracks.yaml"
