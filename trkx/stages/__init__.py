"""The shape every learned stage implements: its ``trkx train`` / ``trkx infer STAGE`` command
plumbing (tools, commands) and its learning-rate schedule (schedules). The stage names are
trkx.stage_names."""
