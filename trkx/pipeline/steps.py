"""The steps of `trkx run`: simulate -> train and infer each stage -> tracks -> evaluation.

Work-folder layout (``W`` = ``--workdir``):

    W/data/{train,val,test}/                TrackML events (simulated, or links to the given ones)
    W/checkpoints/{embedding,filter,gnn}.pt trained models (what `trkx infer --checkpoints` reads)
    W/graphs/{embedding,filter,gnn}/{train,val,test}/   event records after each stage
    W/tracks/                               eventNNNNNNNNN-tracks.csv of the test events
    W/evaluate/                             metrics.json and plots of the test events
"""

from __future__ import annotations

from pathlib import Path

from trkx.pipeline.config import PipelineConfig, StagePlan, resolve_relative
from trkx.pipeline.runner import Step

SPLITS: tuple[str, ...] = ("train", "val", "test")
#: First event id of each simulated split (ids never collide between splits).
FIRST_EVENT_ID = {"train": 100_000, "val": 200_000, "test": 300_000}


def event_dirs(config: PipelineConfig, workdir: Path) -> dict[str, Path]:
    """The TrackML event folder of each split."""
    plan = config.events
    if plan.simulate:
        return {split: workdir / "data" / split for split in SPLITS}
    base = config.path.parent
    return {"train": resolve_relative(plan.train_dir, base),
            "val": resolve_relative(plan.val_dir, base),
            "test": resolve_relative(plan.test_dir, base)}


def _simulate_steps(config: PipelineConfig, workdir: Path) -> list[Step]:
    plan = config.events
    counts = {"train": plan.train_events, "val": plan.val_events, "test": plan.test_events}
    steps = []
    for split in SPLITS:
        out = workdir / "data" / split
        steps.append(Step(f"simulate-{split}", "simulate", (
            "simulate", "--out", str(out), "--events", str(counts[split]),
            "--seed", str(plan.seed), "--pileup", str(plan.pileup),
            "--first-event-id", str(FIRST_EVENT_ID[split]), "--workers", str(plan.workers)),
            out))
    return steps


def _config_args(config: PipelineConfig, plan: StagePlan) -> tuple[str, ...]:
    return ("--config", str(config.stage_config_path(plan)))


def plan_steps(config: PipelineConfig, workdir: Path) -> list[Step]:
    """Every step of a full run, in order."""
    workdir = Path(workdir)
    events = event_dirs(config, workdir)
    checkpoints = workdir / "checkpoints"
    graphs = workdir / "graphs"
    steps = _simulate_steps(config, workdir) if config.events.simulate else []
    n_train, n_val = (config.events.train_events, config.events.val_events)

    def stage_inputs(stage: str) -> dict[str, Path]:
        previous = {"embedding": None, "filter": "embedding", "gnn": "filter"}[stage]
        if previous is None:
            return events
        return {split: graphs / previous / split for split in SPLITS}

    for stage in ("embedding", "filter"):
        plan = config.stages[stage]
        inputs = stage_inputs(stage)
        checkpoint = checkpoints / f"{stage}.pt"
        data_overrides = [f"data.events={inputs['train']}",
                          f"data.val_events_dir={inputs['val']}"]
        if config.events.simulate:
            data_overrides += [f"data.train_events={n_train}", f"data.val_events={n_val}"]
        steps.append(Step(f"train-{stage}", stage, (
            "train", stage, *_config_args(config, plan), "--checkpoint", str(checkpoint),
            *plan.overrides, *data_overrides), checkpoint))
        for split in SPLITS:
            out = graphs / stage / split
            steps.append(Step(f"infer-{stage}-{split}", stage, (
                "infer", stage, *_config_args(config, plan), "--checkpoint", str(checkpoint),
                "--events", str(inputs[split]), "--out", str(out), *plan.overrides), out))

    plan = config.stages["gnn"]
    inputs = stage_inputs("gnn")
    steps.append(Step("train-gnn", "gnn", (
        "train", "gnn", *_config_args(config, plan), "--output", str(checkpoints),
        "--train-dir", str(inputs["train"]), "--val-dir", str(inputs["val"]),
        *plan.overrides), checkpoints / "gnn.pt"))
    gnn_test = graphs / "gnn" / "test"
    infer_gnn = ["infer", "gnn", "--checkpoint", str(checkpoints / "gnn.pt"),
                 "--input-dir", str(inputs["test"]), "--output-dir", str(gnn_test),
                 "--graph-ops", config.inference.graph_ops]
    if config.inference.bf16:
        infer_gnn.append("--bf16")
    steps.append(Step("infer-gnn-test", "gnn", tuple(infer_gnn), gnn_test))

    tracks_args = (*_config_args(config, config.tracks),
                   *(item for o in config.tracks.overrides for item in ("--set", o)))
    steps.append(Step("build-tracks", "tracks", (
        "build-tracks", "--events", str(gnn_test), "--out", str(workdir / "tracks"),
        *tracks_args), workdir / "tracks"))
    steps.append(Step("evaluate", "evaluate", (
        "evaluate", "--tracks", str(workdir / "tracks"), "--events", str(gnn_test),
        "--out", str(workdir / "evaluate"), *tracks_args,
        "--stage", f"embedding={graphs / 'embedding' / 'test'}",
        "--stage", f"filter={graphs / 'filter' / 'test'}"), workdir / "evaluate"))
    return steps
