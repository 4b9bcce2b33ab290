"""The model card of a shipped pipeline (``card.md``), written from what the run recorded, never
typed by hand: the recipe and its command, the training events and seeds, each stage's network,
step budget, best step, validation metrics, working point and training seconds (the ``trkx run``
step markers), the track builder's tuned working point, the machine, and the benchmark figures
given as JSON files with the commands that measured them.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from trkx.stage_names import LEARNED_STAGES

STAGES = LEARNED_STAGES

#: Benchmark JSON name -> (the command that writes it, the keys the card quotes).
BENCHMARKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "physics": ("python benchmarks/physics.py --config {recipe} --workdir {workdir} --no-run "
                "--json {json}",
                ("efficiency", "efficiency_err", "fake_rate", "duplicate_rate",
                 "trackml_score", "stage_efficiency", "stage_efficiency_cumulative",
                 "edges_per_hit", "gnn_purity", "efficiency_prompt", "efficiency_displaced",
                 "real_pixel_efficiency", "real_pixel_fake_rate", "real_pixel_duplicate_rate",
                 "real_pixel_anchors", "real_pixel_vertex_z", "sample_efficiency",
                 "sample_fake_rate", "kaggle_median_seconds", "kaggle_peak_memory_gb",
                 "kaggle_tracks_per_event", "track_length_tvd", "model_megabytes")),
    "inference": ("python benchmarks/inference.py --config {recipe} --checkpoints "
                  "{workdir}/checkpoints --events {workdir}/data/test --json {json}", ()),
}


def _inputs(workdir: Path) -> str:
    """What the models read of each hit, from the embedding checkpoint's config."""
    from trkx.files.checkpoint import load_checkpoint

    embedding = load_checkpoint(workdir / "checkpoints" / "embedding.pt", "embedding")
    if not (embedding.config.get("data") or {}).get("use_cells"):
        return "Hits only: the models read (r, phi, z) of each hit, no cells."
    width = int(embedding.constructor["in_features"])
    return (f"With cells: the embedding and the filter read the leading {width} hit features, "
            "(r, phi, z) then the cluster shape (trkx.data.features: extents and directions"
            + (", cell count and charge" if width > 9 else "") + "); events need cells files.")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    return str(value)


def _stage_rows(workdir: Path, curves: dict[str, list[dict[str, float]]]) -> list[str]:
    from trkx.files.checkpoint import load_checkpoint

    rows = ["| stage | network | steps (best) | train seconds | working point | validation |",
            "|---|---|---|---|---|---|"]
    for stage in STAGES:
        checkpoint = load_checkpoint(workdir / "checkpoints" / f"{stage}.pt", stage)
        seconds = training_seconds(workdir, stage, curves)
        metrics = {k: v for k, v in checkpoint.metrics.items() if k != "best_step"}
        network = ", ".join(f"{k}={v}" for k, v in checkpoint.constructor.items()
                            if not isinstance(v, (dict, list)))
        trainer = checkpoint.config.get("trainer", {})
        steps = trainer.get("max_steps")
        if trainer.get("max_time"):          # capped in wall time: it may stop before max_steps
            steps = f"{steps} or {trainer['max_time']} of wall time"
        best = checkpoint.metrics.get("best_step")
        rows.append(f"| {stage} | {network} | {steps} ({_value(best)}) | "
                    f"{_value(seconds) if seconds is not None else 'n/a'} | "
                    f"{_value(checkpoint.working_point)} | {_value(metrics)} |")
    return rows


def tracks_rows(tuned: Path) -> list[str]:
    """The tuned track builder of ``tuned`` (a tracks.yaml of ``trkx tune-tracks``) as a short
    table: each tuned key's value, the quality models' files, the tuning's settings and its
    validation figures."""
    from trkx.config import load_config
    from trkx.tracks.stage_config import MODEL_FILES, TUNED_KEYS

    config = load_config(tuned)
    builder = config.get("builder") or {}
    rows = ["| key | value |", "|---|---|"]
    rows += [f"| {key} | {_value(builder[key])} |" for key in TUNED_KEYS
             if key in builder and key not in MODEL_FILES]
    models = [builder[key] for key in MODEL_FILES if builder.get(key)]
    rows.append(f"| quality models | {', '.join(f'`{m}`' for m in models) or 'none'} |")
    rows += [f"| tune.{key} | {_value(value)} |" for key, value in
             (config.get("tune") or {}).items()]
    rows += [f"| {key} | {_value(value)} |" for key, value in
             (config.get("tuned") or {}).items()]
    return rows


def training_seconds(workdir: Path, stage: str,
                      curves: dict[str, list[dict[str, float]]]) -> float | None:
    """The stage's training seconds: summed over every stretch of a resumed training
    (``train_seconds`` of its last validation, validation excluded) when logged, else the time
    of its step in this work folder's last invocation."""
    logged = [row["train_seconds"] for row in curves.get(stage, []) if "train_seconds" in row]
    if logged:
        return float(logged[-1])
    marker = workdir / ".trkx" / "steps" / f"train-{stage}.json"
    return float(json.loads(marker.read_text())["seconds"]) if marker.is_file() else None


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          check=False)


def recipe_commit(recipe: Path) -> tuple[str | None, bool]:
    """``(commit, changed)``: the last commit that wrote ``recipe`` (abbreviated hash; None
    outside a git checkout or for a file git does not track) and whether the file differs from
    that commit now. A recipe edited after its models shipped reproduces other models; the
    card names the commit to take the recipe from."""
    folder = recipe.resolve().parent
    try:
        found = _git(folder, "log", "-1", "--format=%h", "--", recipe.resolve().name)
    except OSError:                    # no git on this machine
        return None, False
    commit = found.stdout.strip()
    if found.returncode != 0 or not commit:
        return None, False
    changed = _git(folder, "diff", "--quiet", "HEAD", "--", recipe.resolve().name).returncode != 0
    return commit, changed


def tree_commit(path: Path) -> str | None:
    """The abbreviated commit of the checkout that holds ``path`` (None outside git): the code
    the run was made with. The simulator is code, so the same recipe and seed make other events
    under a later tree."""
    try:
        found = _git(path.resolve().parent, "rev-parse", "--short", "HEAD")
    except OSError:
        return None
    if found.returncode != 0:
        return None
    return found.stdout.strip() or None


def tree_changes(path: Path, shipped: Path | None = None) -> list[str]:
    """The tracked files of the checkout that holds ``path`` that differ from its commit
    (paths from the checkout's root; ``shipped``, the folder being packaged, left out): code
    the commit does not hold, so ``git checkout`` of it would not reproduce the run."""
    try:
        root = _git(path.resolve().parent, "rev-parse", "--show-toplevel")
    except OSError:
        return []
    if root.returncode != 0:
        return []
    top = Path(root.stdout.strip())
    exclude = []
    if shipped is not None and shipped.resolve().is_relative_to(top):
        exclude = [f":(exclude){shipped.resolve().relative_to(top).as_posix()}"]
    found = _git(top, "diff", "--name-only", "HEAD", "--", ".", *exclude)
    return found.stdout.splitlines() if found.returncode == 0 else []


def _reproduce_note(recipe: Path, shipped: Path | None = None) -> list[str]:
    commit, changed = recipe_commit(recipe)
    if commit is None:
        return []
    if changed:
        return [f"The recipe had uncommitted changes when these models were packaged (last "
                f"commit of `{recipe}`: {commit}).", ""]
    tree = tree_commit(recipe) or commit
    note = (f"With trkx as of commit {tree} (`git checkout {tree}`: the whole tree, since the "
            f"events come from its simulator and a later one makes other events from the same "
            f"seed; the recipe was last changed in commit {commit}).")
    dirty = tree_changes(recipe, shipped)
    if dirty:
        named = ", ".join(f"`{name}`" for name in dirty[:5])
        more = f" and {len(dirty) - 5} more" if len(dirty) > 5 else ""
        note += (f" The tree had uncommitted changes when these models were packaged "
                 f"({named}{more}): that commit alone may not reproduce them.")
    return [note, ""]


def reproduce_commands(recipe: Path, workdir: Path, folder: Path,
                       adopted: list[str]) -> list[str]:
    """The card's commands that remake ``folder``: the run and the packaging, and first, when
    the run adopted trained models made elsewhere (``adopted``: their steps, e.g.
    ``train-embedding``; the recipe's header says where the models come from), the line that
    marks them done once they are in ``WORKDIR/checkpoints/`` (scripts/adopt_steps.py)."""
    lines = []
    if adopted:
        lines += [f"The run adopted trained models made elsewhere ({', '.join(adopted)}): put "
                  f"them in `{workdir}/checkpoints/` (the recipe's header says which) and mark "
                  "them done before the run.", "", "```bash",
                  f"python scripts/adopt_steps.py {recipe} {workdir} {' '.join(adopted)}"]
    else:
        lines.append("```bash")
    return lines + [f"trkx run {recipe} --workdir {workdir}",
                    f"trkx package --recipe {recipe} --workdir {workdir} --out {folder}", "```"]


def card_text(name: str, recipe: Path, workdir: Path, folder: Path,
              benchmarks: dict[str, Path],
              curves: dict[str, list[dict[str, float]]] | None = None) -> str:
    """The markdown of the model card of ``folder`` (shipped from ``workdir``), with the
    learning curves ``curves`` (trkx.packaging.curves) when given."""
    from trkx.packaging.curves import curve_rows

    curves = curves or {}
    from trkx import __version__
    from trkx.config import load_config

    events = load_config(recipe)["events"]
    total = 0.0      # each step's last time; a training's summed over its stretches
    elsewhere = []   # steps made on another machine and adopted (their markers say where)
    adopted = []     # the trained models among them
    for marker in sorted((workdir / ".trkx" / "steps").glob("*.json")):
        stage = marker.stem.removeprefix("train-")
        trained = training_seconds(workdir, stage, curves) if stage in STAGES else None
        record = json.loads(marker.read_text())
        total += trained if trained is not None else record["seconds"]
        if record.get("made"):
            elsewhere.append(f"`{marker.stem}` ({record['made']})")
            if stage in STAGES:
                adopted.append(marker.stem)
    lines = [
        f"# Model card: `{name}` (trkx {__version__})", "",
        f"Written {datetime.date.today().isoformat()} by `trkx package` from "
        f"the run in `{workdir}`; the checksums of every file are in `SHA256SUMS`.", "",
        "## Reproduce", "", *_reproduce_note(recipe, folder),
        *reproduce_commands(recipe, workdir, folder, adopted), "",
        "## Training events", "",
        f"Simulated by `trkx simulate` (the run's first steps): {events.get('train_events')} "
        f"training, {events.get('val_events')} validation and {events.get('test_events')} test "
        f"events at pile-up {events.get('pileup')}, seed {events.get('seed')}, primary-vertex "
        f"sigma_z {events.get('vertex_sigma_z')} mm (cycled over the events). "
        f"{_inputs(workdir)} Every cut is chosen on the validation "
        "events. Training seeds: `trainer.seed` of each stage config (stored in the checkpoints "
        "and in the stage YAMLs here).", "",
        "## Stages", "", *_stage_rows(workdir, curves), "",
        f"Machine: {os.cpu_count()} CPU cores ({_cpu()}), no GPU"
        + (f"; made elsewhere: {', '.join(elsewhere)}" if elsewhere else "")
        + ". The whole run (simulation, training over every stretch, inference and evaluation "
        f"of the test events, the sum of its step times): {total / 60:.1f} minutes.", "",
    ]
    tuned = workdir / "checkpoints" / "tracks.yaml"
    lines += ["## Track building", "",
              "The working point chosen by `trkx tune-tracks` on the GNN's scores of the "
              "validation events (every other builder value, and the models, in `tracks.yaml` "
              "and the files it names):", "", *tracks_rows(tuned), ""]
    if curves:
        lines += ["## Learning curves", "",
                  "Each stage's validation metric during training, over every stretch of the "
                  "run (resumed from the committed training state when the recipe has one); "
                  "all validations in `curves.json`, plotted in `curves.png`.", "",
                  *curve_rows(curves), "", "![learning curves](curves.png)", ""]
    lines += ["## Figures", ""]
    if not benchmarks:
        lines.append("No benchmark figures were given when this card was written.")
    for bench, path in benchmarks.items():
        command, keys = BENCHMARKS[bench]
        figures = json.loads(Path(path).read_text())
        lines += [f"`{command.format(recipe=recipe, workdir=workdir, json=path)}`:", ""]
        lines += [f"- {key}: {_value(figures[key])}" for key in keys if key in figures] or \
            [f"- (see `{path}`)"]
        lines.append("")
    return "\n".join(lines) + "\n"
