"""Learning curves of a trained pipeline: every validation of every stage, against optimiser
steps and training seconds, over all the stretches of a resumed run.

A stage trains in ``W/checkpoints/STAGE.run``; its Lightning CSV logs
(``logs/version_N/metrics.csv``, one folder per stretch, carried over by the committed training
state, trkx.pipeline.state) hold one row per validation with ``step``, ``train_seconds``
(training time summed over the stretches, trkx.training.trainer) and the ``val_*`` metrics.
:func:`learning_curves` collects them; ``trkx package`` writes them beside
the model card as ``curves.json`` and ``curves.png``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

#: The metric plotted per stage: how well it keeps the signal it is there to keep.
CURVE_METRIC: dict[str, str] = {"embedding": "val_edge_efficiency",
                                "filter": "val_signal_efficiency", "gnn": "val_auc"}


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def stage_curve(run: Path) -> list[dict[str, float]]:
    """One dict per validation during training of the run folder ``run``: ``step``,
    ``train_seconds`` (when logged) and every ``val_*`` metric, in step order (a step
    validated twice, e.g. a stretch resumed from its last validation, keeps its last row).
    The validation of the exported weights after training logs no ``train_seconds``: in logs
    that have that column, rows without it are left out."""
    rows: dict[int, dict[str, float]] = {}
    logs = sorted((run / "logs").glob("version_*/metrics.csv"),
                  key=lambda p: int(p.parent.name.split("_")[-1]))
    for path in logs:
        with path.open(newline="") as handle:
            for record in csv.DictReader(handle):
                values = {k: _number(v) for k, v in record.items() if k}
                if not any(k.startswith("val_") and v is not None for k, v in values.items()):
                    continue
                step = values.get("step")
                if step is None:
                    continue
                row = {k: v for k, v in values.items()
                       if v is not None and (k.startswith("val_") or k == "train_seconds")}
                rows.setdefault(int(step), {}).update(row)
    timed = any("train_seconds" in row for row in rows.values())
    return [{"step": float(step), **rows[step]} for step in sorted(rows)
            if not timed or "train_seconds" in rows[step]]


def learning_curves(workdir: Path, stages: tuple[str, ...] = tuple(CURVE_METRIC)
                    ) -> dict[str, list[dict[str, float]]]:
    """``stage -> stage_curve`` of every stage of the ``trkx run`` work folder ``workdir``
    that logged validations."""
    curves = {stage: stage_curve(Path(workdir) / "checkpoints" / f"{stage}.run")
              for stage in stages}
    return {stage: curve for stage, curve in curves.items() if curve}


def plot_curves(curves: dict[str, list[dict[str, float]]], path: Path) -> None:
    """One panel per stage: its :data:`CURVE_METRIC` against steps (and training hours on a
    second axis when logged), written to ``path`` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [s for s in curves if any(CURVE_METRIC[s] in row for row in curves[s])]
    figure, axes = plt.subplots(1, max(len(stages), 1), figsize=(4.2 * max(len(stages), 1), 3.4),
                                squeeze=False)
    for axis, stage in zip(axes[0], stages):
        metric = CURVE_METRIC[stage]
        rows = [row for row in curves[stage] if metric in row]
        axis.plot([r["step"] for r in rows], [r[metric] for r in rows], marker="o", ms=3)
        axis.set_title(stage)
        axis.set_xlabel("optimiser steps")
        axis.set_ylabel(metric)
        axis.grid(alpha=0.3)
        axis.ticklabel_format(axis="y", useOffset=False)   # a flat curve's ticks, not an offset
        if all("train_seconds" in r for r in rows) and rows[-1]["step"] > 0:
            per_step = rows[-1]["train_seconds"] / rows[-1]["step"] / 3600.0
            top = axis.secondary_xaxis("top", functions=(lambda s, k=per_step: s * k,
                                                         lambda h, k=per_step: h / k))
            top.set_xlabel("training hours (mean rate)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def curve_rows(curves: dict[str, list[dict[str, float]]], points: int = 6) -> list[str]:
    """Markdown table rows: per stage, its metric at up to ``points`` validations spread over
    the run (first and last included)."""
    lines = ["| stage | metric | step: value (training seconds) |", "|---|---|---|"]
    for stage, rows in curves.items():
        metric = CURVE_METRIC.get(stage)
        rows = [row for row in rows if metric in row]
        if not rows:
            continue
        picks = sorted({round(i * (len(rows) - 1) / max(points - 1, 1))
                        for i in range(points)})
        cells = []
        for row in (rows[i] for i in picks):
            seconds = f" ({row['train_seconds']:.0f} s)" if "train_seconds" in row else ""
            cells.append(f"{row['step']:.0f}: {row[metric]:.4f}{seconds}")
        lines.append(f"| {stage} | {metric} | {'; '.join(cells)} |")
    return lines
