"""The steps of `trkx run`: simulate -> train each stage (and make the next stage's training
records) -> tune the track builder on the GNN's scores of the validation events -> `trkx infer`
on the test events -> evaluation.

Work-folder layout (``W`` = ``--workdir``):

    W/data/{train,val,test}/                TrackML events (simulated, or links to the given ones)
    W/checkpoints/{embedding,filter,gnn}.pt trained models (what `trkx infer --checkpoints` reads)
    W/checkpoints/tracks.yaml               the tuned track builder (`trkx tune-tracks`), with
                                            its quality models' JSON files
    W/checkpoints/{embedding,filter,gnn}.run/   Lightning run folders (resumable training)
    W/graphs/{train,val}/{embedding,filter}/    records of the train/val events after a stage
                                                (the next stage's training data)
    W/graphs/val/gnn/                       the validation events scored by the GNN (what the
                                            track builder is tuned on)
    W/graphs/test/{embedding,filter,gnn}/   records of the test events after each stage
    W/tracks/                               eventNNNNNNNNN-tracks.csv and timing.json of the
                                            test events
    W/evaluate/                             metrics.json and plots of the test events

The test events go through ``trkx infer`` (the one inference path: the same command a user runs
on their own events, with the pipeline's ``inference`` settings); the train/val records are made
by the stage commands (``trkx infer STAGE``) with each stage config's own settings. Every step
names the steps whose outputs it reads (``Step.inputs``), so the runner reruns everything
downstream of a step that runs again.

The GNN trains with the recipe's kernel (``inference.graph_ops``) when its stage config leaves
the choice to ``auto``: ``auto`` times the CSR and scatter kernels on the host, so on a loaded
machine the faster one, and with it the last bits of every sum and of the trained weights,
changes from run to run (docs/design.md, "Reproducibility").
"""

from __future__ import annotations

from pathlib import Path

from trkx.pipeline.config import PipelineConfig, StagePlan, resolve_relative
from trkx.pipeline.runner import Step
from trkx.stage_names import LEARNED_STAGES, TUNED_TRACKS

SPLITS: tuple[str, ...] = ("train", "val", "test")
TRAINING_SPLITS: tuple[str, ...] = ("train", "val")
#: First event id of each simulated split (ids never collide between splits).
FIRST_EVENT_ID = {"train": 100_000, "val": 200_000, "test": 300_000}
PREVIOUS = {"embedding": None, "filter": "embedding", "gnn": "filter"}


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
            "simulate", "--out", str(out), "--n-events", str(counts[split]),
            "--seed", str(plan.seed), "--pileup", str(plan.pileup),
            "--first-event-id", str(FIRST_EVENT_ID[split]), "--workers", str(plan.workers),
            "--vertex-sigma-z", plan.sigma_z_arg(),
            *(() if plan.field_map == "uniform" else ("--field-map", plan.field_map)),
            *(() if plan.support_fraction == 1.0
              else ("--support-fraction", str(plan.support_fraction))),
            *(() if plan.energy_loss == 0 else ("--energy-loss", str(plan.energy_loss)))),
            out))
    return steps


#: Overrides that name a model file: a recipe gives them relative to its own folder.
MODEL_PATH_KEYS: tuple[str, ...] = ("trainer.init_from=", "module.teacher=")


def _relative_to_recipe(overrides: list[str], base: Path) -> list[str]:
    """The overrides with a model path (``trainer.init_from``, ``module.teacher``) taken
    relative to the recipe's folder (as its stage config paths are), so the recipe runs from
    any directory."""
    return [_resolved(o, base) for o in overrides]


def _resolved(override: str, base: Path) -> str:
    for key in MODEL_PATH_KEYS:
        path = override[len(key):] if override.startswith(key) else None
        if path not in (None, "", "null"):
            return f"{key}{resolve_relative(path, base)}"
    return override


def _sets(overrides: list[str]) -> tuple[str, ...]:
    return tuple(item for o in overrides for item in ("--set", o))


def _training_kernel(config: PipelineConfig, plan: StagePlan) -> list[str]:
    """``[module.graph_ops=K]`` with the recipe's kernel ``K`` when the GNN's stage config
    (with its overrides) says ``auto`` and the recipe names a kernel; else nothing (a config
    that cannot be read is left to the config checks, which name why)."""
    from trkx.config import ConfigError, apply_overrides, load_config

    kernel = config.inference.graph_ops
    if kernel == "auto":
        return []
    try:
        stage = apply_overrides(load_config(config.stage_config_path(plan)), plan.overrides)
    except ConfigError:
        return []
    module = stage.get("module")
    chosen = module.get("graph_ops", "auto") if isinstance(module, dict) else "auto"
    return [f"module.graph_ops={kernel}"] if chosen == "auto" else []


def _config_args(config: PipelineConfig, plan: StagePlan) -> tuple[str, ...]:
    return ("--config", str(config.stage_config_path(plan)))


def _source(stage: str, split: str, simulate: bool) -> str | None:
    """The step whose output is ``stage``'s input events of ``split``."""
    previous = PREVIOUS[stage]
    if previous is not None:
        return f"infer-{previous}-{split}"
    return f"simulate-{split}" if simulate else None


def plan_steps(config: PipelineConfig, workdir: Path) -> list[Step]:
    """Every step of a full run, in order."""
    workdir = Path(workdir)
    events = event_dirs(config, workdir)
    checkpoints = workdir / "checkpoints"
    graphs = workdir / "graphs"
    simulate = config.events.simulate
    steps = _simulate_steps(config, workdir) if simulate else []
    counts = ([f"data.train_events={config.events.train_events}",
               f"data.val_events={config.events.val_events}"] if simulate else
              ["data.train_events=null", "data.val_events=null"])

    def inputs(*names: str | None) -> tuple[str, ...]:
        return tuple(name for name in names if name is not None)

    for stage in LEARNED_STAGES:
        plan = config.stages[stage]
        folders = (events if PREVIOUS[stage] is None else
                   {split: graphs / split / PREVIOUS[stage] for split in TRAINING_SPLITS})
        checkpoint = checkpoints / f"{stage}.pt"
        data = [f"data.train_dir={folders['train']}", f"data.val_dir={folders['val']}", *counts]
        kernel = _training_kernel(config, plan) if stage == "gnn" else []
        steps.append(Step(f"train-{stage}", stage, (
            "train", stage, *_config_args(config, plan), "--checkpoint", str(checkpoint),
            *_sets([*_relative_to_recipe(plan.overrides, config.path.parent), *data, *kernel])),
            checkpoint,
            inputs(_source(stage, "train", simulate), _source(stage, "val", simulate))))
        if stage == "gnn":
            break
        for split in TRAINING_SPLITS:
            out = graphs / split / stage
            steps.append(Step(f"infer-{stage}-{split}", stage, (
                "infer", stage, *_config_args(config, plan), "--checkpoint", str(checkpoint),
                "--events", str(folders[split]), "--out", str(out),
                *_sets(_relative_to_recipe(plan.overrides, config.path.parent))), out,
                inputs(f"train-{stage}", _source(stage, split, simulate))))

    gnn_plan, tracks = config.stages["gnn"], config.tracks
    val_scored = graphs / "val" / "gnn"
    steps.append(Step("infer-gnn-val", "gnn", (
        "infer", "gnn", *_config_args(config, gnn_plan), "--checkpoint",
        str(checkpoints / "gnn.pt"), "--events", str(graphs / "val" / "filter"),
        "--out", str(val_scored),
        *_sets(_relative_to_recipe(gnn_plan.overrides, config.path.parent))), val_scored,
        inputs("train-gnn", "infer-filter-val")))
    tuned = checkpoints / TUNED_TRACKS
    # the track fit's field is the one the events were simulated in (the recipe may override)
    field = [f"builder.field_map={config.events.field_map}"] if simulate else []
    steps.append(Step("tune-tracks", "tracks", (
        "tune-tracks", *_config_args(config, tracks), "--events", str(val_scored),
        "--out", str(checkpoints), *_sets([*field, *tracks.overrides])), tuned,
        ("infer-gnn-val",)))
    test_graphs = graphs / "test"
    steps.append(Step("infer-test", "inference", (
        "infer", "--config", str(config.path), "--checkpoints", str(checkpoints),
        "--events", str(events["test"]), "--out", str(workdir / "tracks"),
        "--graphs", str(test_graphs), "--no-evaluate", *_sets(list(config.overrides))),
        workdir / "tracks",
        inputs("train-embedding", "train-filter", "train-gnn", "tune-tracks",
               "simulate-test" if simulate else None),
        configs=tuple(path for path, _ in config.stage_configs().values())))
    steps.append(Step("evaluate", "evaluate", (
        "evaluate", "--tracks", str(workdir / "tracks"), "--events", str(test_graphs / "gnn"),
        "--out", str(workdir / "evaluate"), "--config", str(tuned),
        *_sets(config.tracks.overrides), "--stage", f"embedding={test_graphs / 'embedding'}",
        "--stage", f"filter={test_graphs / 'filter'}"), workdir / "evaluate",
        ("infer-test", "tune-tracks")))
    return steps
