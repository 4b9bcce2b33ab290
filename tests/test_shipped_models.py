"""Shipped models (trkx.models): a packaged pipeline is self-contained and gives the tracks of
the models it was packaged from; every file is checked against SHA256SUMS before loading; the
`trkx infer` default and its flag errors."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from trkx.cli import main as trkx_main
from trkx.files.checkpoint import CheckpointError
from trkx.models import MANIFEST, MODELS_ROOT, set_files, verify
from trkx.packaging.package import CARD, package
from trkx.pipeline.reconstruct import Reconstructor

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def packaged(tiny_run: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    config, workdir = tiny_run
    return package(config, workdir, tmp_path_factory.mktemp("models") / "tiny")


def test_package_is_self_contained_and_gives_the_same_tracks(
        tiny_run: tuple[Path, Path], packaged: Path, tmp_path: Path) -> None:
    config, workdir = tiny_run
    moved = tmp_path / "elsewhere"          # no path back to configs/ or the workdir
    shutil.copytree(packaged, moved)
    assert sorted(p.name for p in moved.iterdir()) == sorted([*set_files(moved), MANIFEST, CARD])
    card = (moved / CARD).read_text()
    assert f"trkx run {config}" in card and "| gnn |" in card
    event = workdir / "data" / "test" / "event000300000"
    ours = Reconstructor(moved / "pipeline.yaml", moved)(event).tracks
    theirs = Reconstructor(config, workdir / "checkpoints")(event).tracks
    pd.testing.assert_frame_equal(ours, theirs)


@pytest.mark.parametrize("name", ["pu200", "pu200_cells"])
def test_a_shipped_sets_track_builder_is_its_tracks_config_alone(name: str) -> None:
    """Every builder key is written in the shipped tracks.yaml (none left to a checkpoint), its
    quality models are files of the set, and gnn.pt knows its edge cut only."""
    from dataclasses import fields

    from trkx.config import load_config
    from trkx.files.checkpoint import load_checkpoint
    from trkx.tracks.builder.building import TrackBuilder
    from trkx.tracks.stage_config import MODEL_FILES, track_builder

    folder = MODELS_ROOT / name
    verify(folder)
    written = load_config(folder / "tracks.yaml")["builder"]
    assert set(written) == {f.name for f in fields(TrackBuilder)}
    builder = track_builder(folder / "tracks.yaml")
    assert builder.walk_cut is not None and builder.min_length > 1
    for key, file in MODEL_FILES.items():
        assert (written[key] == file) == (getattr(builder, key) is not None), key
        assert (written[key] is None) or (file in set_files(folder))
    gnn = load_checkpoint(folder / "gnn.pt", "gnn")
    assert set(gnn.working_point) == {"edge_cut"}          # its validation metrics' cut
    assert 0.0 < gnn.working_point["edge_cut"] < 1.0
    assert builder.edge_cut == written["walk_cut"]          # the builder's cut: tracks.yaml's


@pytest.mark.parametrize("name", ["gnn.pt", "tracks.yaml"])
def test_a_changed_file_is_refused_naming_it(packaged: Path, tmp_path: Path, name: str) -> None:
    copy = tmp_path / "models"
    shutil.copytree(packaged, copy)
    verify(copy)
    with (copy / name).open("ab") as handle:
        handle.write(b"\n")
    with pytest.raises(CheckpointError, match=rf"{re.escape(name)}: sha256 differs"):
        verify(copy)


def test_a_missing_manifest_entry_is_refused(packaged: Path, tmp_path: Path) -> None:
    copy = tmp_path / "models"
    shutil.copytree(packaged, copy)
    lines = (copy / MANIFEST).read_text().splitlines(keepends=True)
    (copy / MANIFEST).write_text("".join(line for line in lines if "filter.yaml" not in line))
    with pytest.raises(CheckpointError, match=r"no checksum for filter\.yaml"):
        verify(copy)


def test_infer_needs_config_and_checkpoints_together(tmp_path: Path, capsys) -> None:
    code = trkx_main(["infer", "--config", "configs/pu200.yaml", "--events", str(tmp_path),
                      "--out", str(tmp_path / "out")])
    assert code == 2
    assert "--config needs --checkpoints too" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_infer_runs_the_cells_set_on_events_with_cells(packaged: Path, sample_prefix: Path,
                                                      tmp_path: Path, monkeypatch, capsys,
                                                      ) -> None:
    """Without --config/--checkpoints, each event with a cells file runs the shipped cells set
    and each without runs the hits-only set; timing.json and the summary line say which. With
    no cells set shipped, every event runs the hits-only set."""
    import json

    import trkx.models

    root = tmp_path / "models"
    for name in (trkx.models.DEFAULT, trkx.models.CELLS):   # two real packaged pipelines
        shutil.copytree(packaged, root / name)
    monkeypatch.setattr(trkx.models, "MODELS_ROOT", root)
    events = tmp_path / "events"
    events.mkdir()
    for part in ("hits", "cells", "particles", "truth"):
        source = Path(f"{sample_prefix}-{part}.csv.gz")
        shutil.copy(source, events / source.name)
        if part != "cells":      # the same event again as id 2, without its cells
            shutil.copy(source, events / source.name.replace("000000001", "000000002"))

    def infer(out: Path) -> tuple[dict, str]:
        capsys.readouterr()
        assert trkx_main(["infer", "--events", str(events), "--out", str(out),
                          "--no-evaluate"]) == 0
        return json.loads((out / "timing.json").read_text()), capsys.readouterr().out

    timing, printed = infer(tmp_path / "both")
    assert timing["models_per_event"] == {"1": "pu200_cells", "2": "pu200"}
    assert "models pu200_cells (cells, 1 event(s)), pu200 (hits only, 1 event(s))" in printed
    for name, event in (("pu200_cells", "1"), ("pu200", "2")):   # each set speaks for itself
        own = timing["sets"][name]
        assert own["events"] == 1 and own["precision"] == "fp32"
        assert all(v == timing["events"][event][k] for k, v in own["mean_seconds"].items())
    # evaluated: each set's figures over its own events (the same models and event here)
    assert trkx_main(["infer", "--events", str(events), "--out", str(tmp_path / "scored")]) == 0
    metrics = json.loads((tmp_path / "scored" / "evaluate" / "metrics.json").read_text())
    cells, hits = metrics["sets"]["pu200_cells"], metrics["sets"]["pu200"]
    assert cells["n_signal_particles"] == hits["n_signal_particles"] > 0
    assert cells["efficiency"] == hits["efficiency"]
    assert metrics["overall"]["n_signal_particles"] == 2 * cells["n_signal_particles"]
    shutil.rmtree(root / trkx.models.CELLS)
    timing, printed = infer(tmp_path / "hits_only")
    assert timing["models_per_event"] == {"1": "pu200", "2": "pu200"}
    assert timing["sets"]["pu200"]["events"] == 2
    assert "models pu200 (hits only, 2 event(s))" in printed
