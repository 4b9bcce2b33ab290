"""Trained pipelines that ship with trkx: what ``trkx infer --events DIR --out DIR`` uses when
no ``--config``/``--checkpoints`` are given, and ``trkx.pipeline.reconstruct.Reconstructor()``.

Two sets: ``pu200`` (hits only, every TrackML hit file) and ``pu200_cells`` (the hits and the
cluster shapes of their cells); ``trkx infer`` runs the cells set on each event that has a cells
file and the hits-only set on the others (:func:`models_for`).

``trkx/models/NAME/`` holds one trained pipeline, self-contained::

    embedding.pt filter.pt gnn.pt       trkx checkpoints (trkx.files.checkpoint, weights_only)
    embedding.yaml filter.yaml gnn.yaml the stage configs the checkpoints were trained with
    tracks.yaml                         the tuned track builder (every value it runs with) and
                                        the evaluation settings (trkx.tracks.stage_config)
    *quality.json                       the track builder's quality models, named by tracks.yaml
    pipeline.yaml                       the pipeline config naming them (its ``events`` section
                                        records the training events)
    SHA256SUMS                          sha256 of each file above (``sha256sum -c`` format)
    card.md                             the model card: how they were made, what they measure

:func:`shipped_models` checks every file against ``SHA256SUMS`` before anything is loaded, so
a damaged or hand-edited file is refused with one line naming it. ``trkx
package`` (trkx.packaging) writes such a folder from a ``trkx run`` work directory.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from trkx.files.checkpoint import CheckpointError
from trkx.stage_names import LEARNED_STAGES

#: The models ``trkx infer`` uses by default: pile-up 200, hits only
#: (configs/recipes/pu200_far.yaml).
DEFAULT = "pu200"
#: The models ``trkx infer`` uses for events that come with cells, where this set is shipped:
#: pile-up 200, the hits and their cluster shapes (configs/recipes/pu200_cells_small.yaml: a
#: 32 x 6 GNN distilled from configs/recipes/pu200_cells_far.yaml's 64 x 6).
CELLS = "pu200_cells"
MODELS_ROOT = Path(__file__).resolve().parent
MANIFEST = "SHA256SUMS"
#: The files of a shipped pipeline, all listed in its manifest.
FILES: tuple[str, ...] = ("embedding.pt", "filter.pt", "gnn.pt", "embedding.yaml",
                          "filter.yaml", "gnn.yaml", "tracks.yaml", "pipeline.yaml")


@dataclass(frozen=True)
class ShippedModels:
    """A verified shipped pipeline: its pipeline YAML and checkpoint folder."""

    name: str
    folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "pipeline.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.folder

    def megabytes(self) -> float:
        """Size of the three checkpoint files in MB (10^6 bytes)."""
        return sum((self.folder / f"{s}.pt").stat().st_size
                   for s in LEARNED_STAGES) / 1e6


def file_sha256(path: Path) -> str:
    """The SHA-256 of a model set's file (read once per process: trkx.files.read_once)."""
    from trkx.files.read_once import file_bytes

    return hashlib.sha256(file_bytes(path)).hexdigest()


def set_files(folder: Path) -> list[str]:
    """The files of the shipped pipeline ``folder``: :data:`FILES` and the quality models its
    tracks.yaml names."""
    from trkx.tracks.stage_config import model_files

    return [*FILES, *model_files(folder / "tracks.yaml")]


def manifest_text(folder: Path) -> str:
    """``SHA256SUMS`` of ``folder``: one ``<sha256>  <name>`` line per file of
    :func:`set_files`."""
    return "".join(f"{file_sha256(folder / name)}  {name}\n" for name in set_files(folder))


def verify(folder: Path) -> None:
    """Check every file of the shipped pipeline ``folder`` against its ``SHA256SUMS``."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: no such file (a shipped pipeline folder lists "
                                "its files' sha256 there)")
    expected: dict[str, str] = {}
    for number, line in enumerate(manifest.read_text().splitlines(), start=1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise CheckpointError(f"{manifest}: line {number} is not '<sha256>  <file>'")
        expected[name] = digest
    missing = [name for name in FILES if name not in expected]
    if missing:
        raise CheckpointError(f"{manifest}: lists no checksum for {', '.join(missing)}")
    for name in expected:
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (listed in {manifest})")
        if file_sha256(path) != expected[name]:
            raise CheckpointError(f"{path}: sha256 differs from {manifest}: the file was "
                                  "changed or damaged after it was shipped (reinstall trkx)")


def shipped_names() -> list[str]:
    """The names of the shipped pipelines (folders with a manifest), sorted."""
    return sorted(p.name for p in MODELS_ROOT.iterdir() if (p / MANIFEST).is_file())


def models_for(has_cells: bool) -> str:
    """The shipped set ``trkx infer`` runs on an event: :data:`CELLS` when the event has cells
    and that set is shipped, else :data:`DEFAULT` (hits only, runs on any event)."""
    return CELLS if has_cells and CELLS in shipped_names() else DEFAULT


def shipped_models(name: str = DEFAULT) -> ShippedModels:
    """The verified shipped pipeline ``name`` (default :data:`DEFAULT`)."""
    folder = MODELS_ROOT / name
    if not folder.is_dir():
        known = shipped_names()
        raise FileNotFoundError(f"{folder}: no shipped models named {name!r} (shipped: "
                                f"{', '.join(known) or 'none'}); give --config and "
                                "--checkpoints of models you trained")
    verify(folder)
    return ShippedModels(name, folder)
