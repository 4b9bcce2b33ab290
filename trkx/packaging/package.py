"""Package a trained pipeline as shipped models (the layout of :mod:`trkx.models`):

    trkx package --recipe configs/recipes/pu200_far.yaml --workdir runs/pu200_far \\
        --out trkx/models/pu200

copies ``WORKDIR/checkpoints/{embedding,filter,gnn}.pt`` (each verified first) and the tuned
track builder (``tracks.yaml`` and its quality models, ``trkx tune-tracks``), writes each
stage's config as the checkpoint stores it (the exact config it was trained with: includes
merged, overrides applied) and a
``pipeline.yaml`` naming them with the recipe's ``events`` and ``inference`` sections, then
``SHA256SUMS`` and the model card ``card.md`` (:mod:`trkx.packaging.card`: from the run's records
and the benchmark JSON files given with ``--physics``, ``--inference``),
with the learning curves of every stage beside it (``curves.json``, ``curves.png``). The
folder is replaced whole (built beside it, then renamed).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from trkx.models import MANIFEST, manifest_text, set_files, verify
from trkx.stage_names import LEARNED_STAGES

STAGES = LEARNED_STAGES
CARD = "card.md"
#: The learning curves beside the card (trkx.packaging.curves): documentation, not in SHA256SUMS.
CURVES_JSON, CURVES_PLOT = "curves.json", "curves.png"


def _write_yaml(path: Path, header: str, content: dict[str, Any]) -> None:
    path.write_text(f"# {header}\n" + yaml.safe_dump(content, sort_keys=False))


def package(recipe: Path, workdir: Path, out: Path,
            benchmarks: dict[str, Path] | None = None) -> Path:
    """Write the shipped-model folder ``out`` from the ``trkx run`` of ``recipe`` in
    ``workdir`` (``benchmarks``: name -> JSON quoted by the card); returns ``out``."""
    from trkx.config import load_config
    from trkx.files.checkpoint import load_checkpoint
    from trkx.packaging.card import card_text
    from trkx.packaging.curves import learning_curves, plot_curves
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.inference import checkpoint_paths
    from trkx.stage_names import TUNED_TRACKS
    from trkx.tracks.stage_config import model_files, track_builder

    pipeline = load_pipeline_config(recipe)
    paths = checkpoint_paths(workdir / "checkpoints")
    out.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    build.chmod(0o755)                   # mkdtemp makes it private; package data is readable
    try:
        for stage in STAGES:
            checkpoint = load_checkpoint(paths[stage], stage)    # verified before shipping
            shutil.copyfile(paths[stage], build / f"{stage}.pt")
            _write_yaml(build / f"{stage}.yaml",
                        f"{stage} config the shipped {stage}.pt was trained with "
                        f"({recipe.name}, stored in the checkpoint)", checkpoint.config)
        tuned = workdir / "checkpoints" / TUNED_TRACKS     # verified: a builder is made of it
        track_builder(tuned, list(pipeline.tracks.overrides))
        for name in (TUNED_TRACKS, *model_files(tuned)):
            shutil.copyfile(tuned.parent / name, build / name)
        raw = load_config(recipe)
        _write_yaml(build / "pipeline.yaml",
                    f"the shipped pipeline: `trkx run {recipe}` (events: the training run's)",
                    {"events": raw["events"],
                     "stages": {s: {"config": f"{s}.yaml", "overrides": []} for s in STAGES},
                     "tracks": {"config": "tracks.yaml", "overrides": []},
                     "inference": raw.get("inference") or {}})
        (build / MANIFEST).write_text(manifest_text(build))
        curves = learning_curves(workdir)
        if curves:
            (build / CURVES_JSON).write_text(json.dumps(curves, indent=1))
            plot_curves(curves, build / CURVES_PLOT)
        (build / CARD).write_text(card_text(out.name, recipe, workdir, out, benchmarks or {},
                                            curves))
        verify(build)
        extras = [CURVES_JSON, CURVES_PLOT] if curves else []
        assert sorted(p.name for p in build.iterdir()) == sorted([*set_files(build), MANIFEST,
                                                                  CARD, *extras])
        old = out.with_name(f".{out.name}.old")
        if out.exists():
            out.rename(old)
        build.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return out
