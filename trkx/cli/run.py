"""``trkx run CONFIG --workdir DIR``: the whole pipeline, resumable.

Simulates (or takes) train/validation/test events, trains the embedding, filter and GNN (each
stage's inference on the train/validation events makes the next stage's training records), runs
`trkx infer` on the test events (the same command and code as on any events: tracks, timing.json
and every stage's graphs) and evaluates them, then prints a
table (edge efficiency/purity per stage, track efficiency, fake and duplicate rates, TrackML
score, time per stage). Each step is skipped when its outputs are already there and valid (same
command, same configs, nothing upstream rerun), so an interrupted run continues where it
stopped. Every stage config (with its overrides) is checked before the first step runs.
Given event folders (events.simulate: false) must hold TrackML events with truth, the test
events too, as every run ends by evaluating them; this is checked first, --dry-run included.
A recipe with a ``state.folder`` (configs/recipes/pu200_far.yaml) resumes its training from
the state stored there when the work folder has none of its own; ``--save-state`` stores the work
folder's training state there (trkx.pipeline.state), so a long training continues on a
fresh clone. ``--until STEP`` stops after the named step (``--dry-run`` lists the names), e.g.
``--until train-gnn`` for a training stretch that another follows at once: the track builder
is not tuned, no test events are run and nothing is evaluated.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "run", help="run the whole pipeline (simulate, train, infer, tracks, evaluate)",
        description=description(__doc__))
    parser.add_argument("config", help="pipeline YAML, e.g. configs/quickstart.yaml")
    parser.add_argument("--workdir", required=True, type=Path,
                        help="folder for events, checkpoints, graphs, tracks and evaluation")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override, e.g. events.test_events=10")
    parser.add_argument("--dry-run", action="store_true",
                        help="check every config, print the steps and whether each is done, "
                             "run nothing")
    parser.add_argument("--save-state", action="store_true",
                        help="copy the work folder's resumable training state (checkpoints, "
                             "optimiser, step, learning curves) into the recipe's state.folder "
                             "and exit, running nothing")
    parser.add_argument("--until", metavar="STEP",
                        help="stop after this step (the names --dry-run prints), e.g. train-gnn")
    parser.set_defaults(func=run)


def steps_until(steps: list, name: str | None, config: str) -> list:
    """The steps up to and including the one called ``name`` (all of them for None)."""
    from trkx.config import ConfigError

    if name is None:
        return steps
    names = [step.name for step in steps]
    if name not in names:
        raise ConfigError(f"{config}: --until {name}: no such step (the steps: "
                          f"{', '.join(names)})")
    return steps[:names.index(name) + 1]


def check_model_files(config: str, overrides: list[str]) -> None:
    """A model file named by a training step (``trainer.init_from``, ``module.teacher``: the
    recipe's path, made absolute by trkx.pipeline.steps) must exist before the first step
    runs, not when the stage's turn comes."""
    from trkx.config import ConfigError
    from trkx.pipeline.steps import MODEL_PATH_KEYS

    for override in overrides:
        for key in MODEL_PATH_KEYS:
            path = override[len(key):] if override.startswith(key) else None
            if path not in (None, "", "null") and not Path(path).is_file():
                raise ConfigError(f"{config}: {key[:-1]} {path}: no such model file")


def validate_steps(steps, config) -> None:
    """Check the config of every stage step (file + overrides) and of the track steps."""
    from trkx.cli import build_parser
    from trkx.cli.stages import stage_module
    from trkx.config import instantiate, section
    from trkx.stages import tools as stage_tools
    from trkx.tracks.builder.building import TrackBuilder
    from trkx.tracks.evaluate.metrics import MetricCuts
    from trkx.tracks.files import config_section
    from trkx.tracks.stage_config import builder_values, tracks_config
    from trkx.tracks.tune.tune_tracks import TrackTuning

    parser = build_parser()
    for step in steps:
        if step.argv[0] in ("train", "infer"):
            args = parser.parse_args(list(step.argv))
            if args.stage is not None:      # a stage command (trkx infer alone: below)
                overrides = stage_tools.overrides_of(args)
                stage_tools.stage_config(args.config, overrides, args.func.args[0])
                check_model_files(args.config, overrides)
    for stage, (path, overrides) in config.stage_configs().items():   # what trkx infer loads
        if stage != "tracks":
            stage_tools.stage_config(path, overrides, stage_module(stage))
    tracks = str(config.stage_config_path(config.tracks))
    values = tracks_config(tracks, config.tracks.overrides)
    # the tuned keys are chosen once the GNN is trained (tune-tracks): check the others
    instantiate(TrackBuilder, builder_values(values, Path(tracks).parent, tracks, untuned=True),
                f"{tracks}: builder")
    instantiate(TrackTuning, section(values, "tune", tracks), f"{tracks}: tune")
    config_section(tracks, config.tracks.overrides, "metrics", MetricCuts, tracks)


def run(args: argparse.Namespace) -> int:
    from trkx.files.atomic import atomic_write
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.preflight import check_run_events
    from trkx.pipeline.runner import plan_states, run_steps, seconds_per_stage, step_process
    from trkx.pipeline.steps import plan_steps
    from trkx.pipeline.summary import format_run_summary, load_metrics

    workdir = args.workdir
    if args.save_state:
        from trkx.pipeline.state import save_state, state_folder

        config = load_pipeline_config(args.config, args.overrides)
        written = save_state(config, workdir)
        for stage, size in written.items():
            print(f"{stage}: {size / 1e6:.1f} MB of training state -> "
                  f"{state_folder(config) / stage}")
        return 0
    check_run_events(args.config, args.overrides)   # given event folders, before any step
    config = load_pipeline_config(args.config, args.overrides)
    steps = plan_steps(config, workdir)
    validate_steps(steps, config)
    until = args.until
    steps = steps_until(steps, until, args.config)
    if args.dry_run:
        states = plan_states(steps, workdir)
        for step in steps:
            state = "done" if states[step.name] is not None else "to do"
            print(f"{state:>6s}  {step.name:<22s} trkx {' '.join(step.argv)}")
        return 0
    from trkx.pipeline.state import restore_state, state_folder

    workdir.mkdir(parents=True, exist_ok=True)
    for stage in restore_state(config, workdir):
        print(f"{stage}: training state restored from {state_folder(config) / stage}")
    debug = bool(getattr(args, "debug", False))     # each step runs in a process of its own
    results = run_steps(steps, workdir, lambda argv: step_process(argv, debug))
    if until is not None and steps[-1].name != "evaluate":
        print(f"stopped after {until} (--until): nothing evaluated")
        return 0
    seconds = seconds_per_stage(results)
    metrics = load_metrics(workdir / "evaluate")
    print(format_run_summary(metrics, seconds))
    timing = json.loads((workdir / "tracks" / "timing.json").read_text())
    summary = json.dumps(
        {"precision": timing["precision"], "graph_ops": timing["graph_ops"],
         "seconds_per_stage": seconds, "overall": metrics["overall"],
         "edges": {k: v.get("overall") for k, v in metrics.get("edges", {}).items()}},
        indent=2)
    atomic_write(workdir / "run_summary.json", lambda tmp: tmp.write_text(summary))
    return 0
