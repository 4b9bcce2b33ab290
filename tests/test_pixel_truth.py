"""Events with truth for part of their hits (``-truth-pixel``): tracks are scored on their
projection onto the hits that carry truth (trkx.tracks.evaluate.projection)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trkx.cli import main as trkx_main
from trkx.tracks.evaluate.metrics import MetricCuts, overall_summary
from trkx.tracks.evaluate.projection import evaluate_pixel_truth, pixel_truth_file

from .test_sim_vs_real import hand_made_event_with_strips


def write_pixel_event(folder: Path) -> tuple[Path, int, pd.DataFrame]:
    """The hand-made event plus six strip hits of particle A, with truth rows only for the
    pixel hits (volume 8) and none for hit 3: ``(prefix, A, hits)``."""
    hits, particles, truth = hand_made_event_with_strips()
    a = int(particles["particle_id"][0])
    pixel = truth[truth["hit_id"].isin(hits["hit_id"][hits["volume_id"] == 8])]
    prefix = folder / "event000000005"
    hits.to_csv(f"{prefix}-hits.csv", index=False)
    particles.to_csv(f"{prefix}-particles.csv", index=False)
    pixel[pixel["hit_id"] != 3].to_csv(f"{prefix}-truth-pixel.csv.gz", index=False)
    return prefix, a, hits


def test_tracks_are_scored_on_the_hits_with_truth(tmp_path: Path) -> None:
    prefix, _a, hits = write_pixel_event(tmp_path)
    assert pixel_truth_file(prefix) == Path(f"{prefix}-truth-pixel.csv.gz")
    assert pixel_truth_file(tmp_path / "event000000006") is None
    # A's pixel hits 1, 2, 4 (3 has no truth row: not in the projection) and all strip hits
    # (5, 8..13) in one track: 3 of its 10 hits are A's, so the whole track has no majority,
    # its projection {1, 2, 4} is A's alone
    track = hits["hit_id"].isin([1, 2, 3, 4, 5, *range(8, 14)])
    tracks = pd.DataFrame({"hit_id": hits["hit_id"], "track_id": np.where(track, 7, 9)})
    found = overall_summary([evaluate_pixel_truth(prefix, tracks, 5)])
    assert found["n_signal_particles"] == 1 and found["efficiency"] == 1.0
    assert found["n_tracks"] == 1 and found["fake_rate"] == 0.0   # {6, 7}: 2 hits, no candidate


def test_hits_missing_from_the_tracks_and_short_projections(tmp_path: Path) -> None:
    prefix, _a, _hits = write_pixel_event(tmp_path)
    # only hits 1 and 2 in a track: a 2-hit projection is no candidate, A is not found
    tracks = pd.DataFrame({"hit_id": [1, 2], "track_id": [4, 4]})
    lost = overall_summary([evaluate_pixel_truth(prefix, tracks, 5)])
    assert lost["n_signal_particles"] == 1 and lost["efficiency"] == 0.0
    assert lost["n_tracks"] == 0
    # a signal cut above A's pT: no signal particle at all
    none = overall_summary([evaluate_pixel_truth(prefix, tracks, 5, MetricCuts(pt_min=5.0))])
    assert none["n_signal_particles"] == 0


@pytest.mark.slow
def test_trkx_infer_scores_pixel_truth_events(tiny_run: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    """`trkx infer` on an event with only pixel truth writes and prints the projected figures,
    the same as scoring its tracks file directly (and draws the plots when asked)."""
    config, workdir = tiny_run
    source = workdir / "data" / "test" / "event000300000"
    events = tmp_path / "events"
    events.mkdir()
    prefix = events / "event000300000"
    hits = pd.read_csv(f"{source}-hits.csv.gz")
    hits.to_csv(f"{prefix}-hits.csv.gz", index=False)
    shutil.copyfile(f"{source}-particles.csv.gz", f"{prefix}-particles.csv.gz")
    truth = pd.read_csv(f"{source}-truth.csv.gz")
    pixel = truth[truth["hit_id"].isin(hits["hit_id"][hits["volume_id"].isin([7, 8, 9])])]
    pixel[["hit_id", "particle_id"]].to_csv(f"{prefix}-truth-pixel.csv.gz", index=False)
    out = tmp_path / "out"
    assert trkx_main(["infer", "--config", str(config), "--checkpoints",
                      str(workdir / "checkpoints"), "--events", str(events), "--out",
                      str(out), "--plots"]) == 0
    assert "pixel truth (1 event(s)" in capsys.readouterr().out
    assert (out / "evaluate" / "efficiency_vs_pt.png").read_bytes()[:4] == b"\x89PNG"
    written = json.loads((out / "evaluate" / "pixel_truth.json").read_text())
    direct = overall_summary([evaluate_pixel_truth(
        prefix, pd.read_csv(out / "event000300000-tracks.csv"), 300000)])
    assert written["n_signal_particles"] == direct["n_signal_particles"] > 0
    assert written["efficiency"] == pytest.approx(direct["efficiency"])
    # no full truth: the projection, written as trkx evaluate writes (the notebook's input)
    metrics = json.loads((out / "evaluate" / "metrics.json").read_text())
    assert metrics["truth"].startswith("pixel hits")
    assert metrics["overall"]["n_signal_particles"] == written["n_signal_particles"]
