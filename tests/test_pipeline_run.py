"""`trkx run` end to end on a tiny configuration, and `trkx infer` on new events."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from trkx.checkpoint import load_checkpoint
from trkx.cli import main as trkx_main
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.steps import plan_steps

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


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("run")
    config = tiny_config(base)
    workdir = base / "work"
    assert trkx_main(["run", str(config), "--workdir", str(workdir)]) == 0
    return config, workdir


def test_run_end_to_end(tiny_run: tuple[Path, Path]) -> None:
    _, workdir = tiny_run
    embedding = load_checkpoint(workdir / "checkpoints" / "embedding.pt", "embedding")
    assert embedding.constructor["in_features"] == 3          # hits only: r, phi, z
    assert embedding.config["data"]["use_cells"] is False
    filter_ = load_checkpoint(workdir / "checkpoints" / "filter.pt", "filter")
    assert filter_.config["model"]["hit_features"] == 3
    assert set(filter_.working_point) == {"score_cut"}
    gnn = load_checkpoint(workdir / "checkpoints" / "gnn.pt", "gnn")
    assert {"walk_cut", "min_length"} <= set(gnn.working_point)
    # the one test event (first simulated test id 300000): every hit in exactly one track
    hits = pd.read_csv(workdir / "data" / "test" / "event000300000-hits.csv.gz")
    assert [p.name for p in (workdir / "tracks").iterdir()] == ["event000300000-tracks.csv"]
    tracks = pd.read_csv(workdir / "tracks" / "event000300000-tracks.csv")
    assert sorted(tracks["hit_id"]) == sorted(hits["hit_id"])
    metrics = json.loads((workdir / "evaluate" / "metrics.json").read_text())
    overall = metrics["overall"]
    assert overall["n_events"] == 1 and overall["n_hits"] == len(hits)
    assert [e["event_id"] for e in metrics["events"]] == [300000]
    assert overall["n_signal_particles"] > 0 and overall["efficiency"] == (
        overall["n_matched_signal_particles"] / overall["n_signal_particles"])
    assert overall["n_tracks"] == (overall["n_matched_tracks"] + overall["n_fake_tracks"])
    # each stage keeps a subset of the edges it is given, on the same truth
    edges = {name: metrics["edges"][name]["overall"] for name in ("embedding", "filter")}
    edges["gnn"] = metrics["edges"]["events"]["overall"]
    assert len({e["n_signal_truth_edges"] for e in edges.values()}) == 1
    assert edges["embedding"]["n_kept"] >= edges["filter"]["n_kept"] >= edges["gnn"]["n_kept"]
    summary = json.loads((workdir / "run_summary.json").read_text())
    assert summary["overall"] == overall
    assert list(summary["seconds_per_stage"]) == ["simulate", "embedding", "filter", "gnn",
                                                   "tracks", "evaluate"]


def test_resume_skips_finished_steps(tiny_run: tuple[Path, Path],
                                     capsys: pytest.CaptureFixture) -> None:
    config, workdir = tiny_run
    shutil.rmtree(workdir / "evaluate")
    capsys.readouterr()
    assert trkx_main(["run", str(config), "--workdir", str(workdir)]) == 0
    out = capsys.readouterr().out
    names = [step.name for step in plan_steps(load_pipeline_config(config, []), workdir)]
    n = len(names)
    for index, name in enumerate(names[:-1], start=1):      # every step but the evaluation
        assert f"[{index}/{n}] {name}: done before" in out
    assert names[-1] == "evaluate" and f"[{n}/{n}] evaluate: finished" in out
    assert out.count("done before") == n - 1


def test_infer_on_events_without_cells_or_truth(tiny_run: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    config, workdir = tiny_run
    events = tmp_path / "events"
    events.mkdir()
    for path in (workdir / "data" / "test").glob("*-hits.csv.gz"):
        shutil.copy(path, events / path.name)
    out = tmp_path / "out"
    assert trkx_main(["infer", "--config", str(config), "--checkpoints",
                      str(workdir / "checkpoints"), "--events", str(events),
                      "--out", str(out)]) == 0
    timing = json.loads((out / "timing.json").read_text())
    assert set(timing["mean_seconds"]) >= {"embedding", "filter", "gnn", "tracks"}
    assert [p.name for p in out.glob("event*-tracks.csv")] == ["event000300000-tracks.csv"]
    assert not (out / "evaluate").exists()
    # the same checkpoints on the same hits: the tracks of the run's build-tracks step
    ours = pd.read_csv(out / "event000300000-tracks.csv").sort_values("hit_id")
    run = pd.read_csv(workdir / "tracks" / "event000300000-tracks.csv").sort_values("hit_id")
    assert ours["hit_id"].tolist() == run["hit_id"].tolist()
    pairs = set(zip(ours["track_id"], run["track_id"]))     # one-to-one relabelling
    assert len(pairs) == ours["track_id"].nunique() == run["track_id"].nunique()


def test_bad_config_key_fails_before_any_work(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    config = tiny_config(tmp_path)
    text = config.read_text().replace("test_events", "tset_events")
    config.write_text(text)
    assert trkx_main(["run", str(config), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'tset_events' (did you mean 'test_events'?)" in err
    assert not (tmp_path / "w").exists()


def test_dry_run_catches_a_typo_in_a_stage_override(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    config = tiny_config(tmp_path)
    text = yaml.safe_load(config.read_text())
    text["stages"]["filter"]["overrides"].append("model.hiden=8")
    config.write_text(yaml.safe_dump(text))
    assert trkx_main(["run", str(config), "--workdir", str(tmp_path / "w"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "filter.yaml: model: unknown key 'hiden'" in err[0]
    assert not (tmp_path / "w").exists()                    # nothing was simulated


def test_dry_run_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`trkx run --dry-run | head`: the reader goes away, no BrokenPipeError traceback."""
    import os
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "trkx", "run", str(tiny_config(tmp_path)), "--workdir",
         str(tmp_path / "w"), "--dry-run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    process.stdout.close()                                  # before the plan is printed
    err = process.stderr.read()
    assert process.wait(timeout=120) == 141                 # 128 + SIGPIPE, as a shell's
    assert err == ""
