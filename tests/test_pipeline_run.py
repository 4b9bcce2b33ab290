"""`trkx run` end to end on a tiny configuration, and `trkx infer` on new events."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from trkx.cli import main as trkx_main
from trkx.data.record import load_record
from trkx.files.checkpoint import load_checkpoint
from trkx.tracks.stage_config import track_builder
from trkx.tracks.tune.tuning import DEFAULT_CUTS, DEFAULT_LENGTHS

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def tiny_config(tmp_path: Path) -> Path:
    """The shipped hits-only quick start (configs/quickstart_hits_only.yaml: no cell features)
    shrunk to pile-up 3, four events and a few steps per stage."""
    config = yaml.safe_load((CONFIGS / "quickstart_hits_only.yaml").read_text())
    config["events"].update({"train_events": 2, "val_events": 1, "test_events": 1,
                             "pileup": 3, "seed": 5, "workers": 1})
    quiet = ["trainer.logger=none", "trainer.progress_bar=false", "trainer.val_every_n_epochs=1"]
    tiny = {"embedding": ["trainer.max_steps=4"],
            "filter": ["trainer.max_steps=4", "trainer.min_signal_efficiency=0"],
            "gnn": ["trainer.max_steps=2", "model.hidden=16", "model.n_graph_iters=2",
                    "trainer.min_signal_efficiency=0"]}
    for stage, plan in config["stages"].items():
        plan["config"] = str(CONFIGS / plan["config"])
        plan["overrides"] = [*plan["overrides"], *quiet, *tiny[stage]]
    config["tracks"]["config"] = str(CONFIGS / config["tracks"]["config"])
    config["inference"]["graph_ops"] = "csr"
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# ``tiny_run`` (tests/conftest.py): ``trkx run`` of tiny_config, once per test run.


@pytest.mark.slow
def test_run_end_to_end(tiny_run: tuple[Path, Path]) -> None:
    _, workdir = tiny_run
    embedding = load_checkpoint(workdir / "checkpoints" / "embedding.pt", "embedding")
    assert embedding.constructor["in_features"] == 3          # hits only: r, phi, z
    assert embedding.config["data"]["use_cells"] is False
    filter_ = load_checkpoint(workdir / "checkpoints" / "filter.pt", "filter")
    assert filter_.config["model"]["hit_features"] == 3
    assert set(filter_.working_point) == {"score_cut"}
    gnn = load_checkpoint(workdir / "checkpoints" / "gnn.pt", "gnn")
    assert set(gnn.working_point) == {"edge_cut"}
    tuned = track_builder(workdir / "checkpoints" / "tracks.yaml")     # every key concrete
    assert tuned.walk_cut in DEFAULT_CUTS and tuned.min_length in DEFAULT_LENGTHS
    metrics = json.loads((workdir / "evaluate" / "metrics.json").read_text())
    overall = metrics["overall"]
    # The seeded test event (seed 5, pile-up 3, id 300000): measured once, 654 hits and 11
    # signal particles with hits on >= 3 layers (12 of >= 3 hits; 740 hits and 11 before the
    # simulator's secondaries took their pT per production cell and direction per pT bin); a
    # changed simulation, record layer or signal definition changes these counts.
    assert (overall["n_events"], overall["n_hits"], overall["n_signal_particles"]) == (1, 654, 11)
    assert overall["efficiency"] == overall["n_matched_signal_particles"] / 11
    assert overall["fake_rate"] == overall["n_fake_tracks"] / overall["n_tracks"]
    # The embedding radius is tuned on the validation event for 0.995 of its signal pairs:
    # measured 1.0 edge efficiency at purity 0.068 (11,640 edges) on the test event. Both
    # later stages keep a subset of those edges (the filter's cut is tuned for 0.99 of them).
    edges = {name: stage["overall"] for name, stage in metrics["edges"].items()}
    assert edges["embedding"]["efficiency"] >= 0.95
    assert 0.03 <= edges["embedding"]["purity"] <= 0.3
    assert edges["filter"]["n_edges"] <= edges["embedding"]["n_edges"]
    assert edges["events"]["n_edges"] == edges["filter"]["n_edges"]  # the GNN scores them all
    assert edges["filter"]["efficiency"] >= 0.9
    # One submission for the one test event, every hit of it in exactly one track.
    tracks = pd.read_csv(workdir / "tracks" / "event000300000-tracks.csv")
    hits = pd.read_csv(workdir / "data" / "test" / "event000300000-hits.csv.gz")
    assert sorted(p.name for p in (workdir / "tracks").iterdir()) == \
        ["event000300000-parameters.csv", "event000300000-tracks.csv", "timing.json"]
    fitted = pd.read_csv(workdir / "tracks" / "event000300000-parameters.csv")
    assert set(fitted["track_id"]) <= set(tracks["track_id"]) and (fitted["n_hits"] >= 3).all()
    assert sorted(tracks["hit_id"]) == sorted(hits["hit_id"]) and len(hits) == 654
    summary = json.loads((workdir / "run_summary.json").read_text())
    assert set(summary["seconds_per_stage"]) >= {"simulate", "embedding", "filter", "gnn",
                                                 "inference"}
    assert summary["precision"] == "fp32"          # the pipeline default, pinned
    # the test events' graphs of every stage, written by `trkx infer --graphs`
    assert all((workdir / "graphs" / "test" / stage / "event000300000.pt").is_file()
               for stage in ("embedding", "filter", "gnn"))


@pytest.mark.slow
def test_resume_skips_finished_steps(tiny_run: tuple[Path, Path],
                                     capsys: pytest.CaptureFixture) -> None:
    config, workdir = tiny_run
    shutil.rmtree(workdir / "evaluate")
    capsys.readouterr()
    assert trkx_main(["run", str(config), "--workdir", str(workdir)]) == 0
    out = capsys.readouterr().out
    steps = [line.split("] ", 1)[1].split(":")[0] for line in out.splitlines()
             if line.startswith("[") and ("done before" in line or "finished" in line)]
    skipped = [line.split("] ", 1)[1].split(":")[0] for line in out.splitlines()
               if line.startswith("[") and "done before" in line]
    assert len(steps) == 14 and skipped == steps[:13] and steps[13] == "evaluate"
    assert "tune-tracks" in skipped and "infer-gnn-val" in skipped
    assert f"[14/14] evaluate: trkx evaluate --tracks {workdir / 'tracks'}" in out


def gnn_scores(workdir: Path) -> torch.Tensor:
    return load_record(workdir / "graphs" / "test" / "gnn" / "event000300000.pt").scores


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_infer_gives_the_tracks_of_run(tiny_run: tuple[Path, Path], tmp_path: Path,
                                       precision: str) -> None:
    """`trkx infer` on the bare hits (no cells, no truth) gives exactly the tracks `trkx run`
    built from the same checkpoints, at either precision: one inference path."""
    config, workdir = tiny_run
    sets = ["--set", f"inference.precision={precision}"]
    fp32_scores = gnn_scores(workdir)
    events = tmp_path / "events"
    events.mkdir()
    for path in (workdir / "data" / "test").glob("*-hits.csv.gz"):
        shutil.copy(path, events / path.name)
    out = tmp_path / "out"
    try:
        assert trkx_main(["run", str(config), "--workdir", str(workdir), *sets]) == 0
        summary = json.loads((workdir / "run_summary.json").read_text())
        assert summary["precision"] == precision
        scores = gnn_scores(workdir)
        if precision == "bf16":          # bf16 really ran: the graph moved, but only a little
            assert not torch.equal(scores, fp32_scores)
            assert abs(len(scores) - len(fp32_scores)) <= 0.02 * len(fp32_scores)
        else:
            assert torch.equal(scores, fp32_scores)
        run = pd.read_csv(workdir / "tracks" / "event000300000-tracks.csv")
        assert trkx_main(["infer", "--config", str(config), "--checkpoints",
                          str(workdir / "checkpoints"), "--events", str(events),
                          "--out", str(out), *sets]) == 0
    finally:
        if precision != "fp32":          # leave the shared run as it was
            assert trkx_main(["run", str(config), "--workdir", str(workdir)]) == 0
    timing = json.loads((out / "timing.json").read_text())
    assert set(timing["mean_seconds"]) >= {"embedding", "filter", "gnn", "tracks"}
    assert timing["precision"] == precision
    assert not (out / "evaluate").exists()            # no truth, no evaluation
    ours = pd.read_csv(out / "event000300000-tracks.csv")
    hits = pd.read_csv(events / "event000300000-hits.csv.gz")
    assert sorted(ours["hit_id"]) == sorted(hits["hit_id"])
    assert (ours["event_id"] == 300000).all()
    pd.testing.assert_frame_equal(ours.sort_values("hit_id", ignore_index=True),
                                  run.sort_values("hit_id", ignore_index=True))


def test_bad_config_key_fails_before_any_work(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    config = tiny_config(tmp_path)
    text = config.read_text().replace("test_events", "tset_events")
    config.write_text(text)
    assert trkx_main(["run", str(config), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'tset_events' (did you mean 'test_events'?)" in err
    assert not (tmp_path / "w").exists()
