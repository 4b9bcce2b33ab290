"""``trkx build-tracks`` -> ``trkx evaluate`` round trip, and the evaluation notebook."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from trkx.cli import main
from trkx.data.record import build_event_record, save_record
from trkx.tracks.builder.building import TrackBuilder

REPO = Path(__file__).resolve().parents[1]


def scored_simulated_record(seed: int = 3):
    """A small simulated event with noise: truth edges score 0.9, random other edges 0.05."""
    from trkx.data.simulate import generate_particles, simulate_event

    rng = np.random.default_rng(seed)
    event = simulate_event(generate_particles(1.0, rng), rng)
    record = build_event_record(event["hits"], None, event["particles"], event["truth"],
                                use_cells=False, event_id=42)
    n = record.num_nodes
    noise = torch.from_numpy(rng.integers(0, n, size=(2, 2 * n)))
    record.edge_index = torch.cat([record.track_edges, noise], dim=1)
    record.scores = torch.cat([torch.full((record.track_edges.shape[1],), 0.9),
                               torch.full((noise.shape[1],), 0.05)])
    return record


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    record = scored_simulated_record()
    save_record(record, root / "records" / "event000000042.pt")
    assert main(["build-tracks", "--events", str(root / "records"),
                 "--out", str(root / "tracks"), "--config", str(REPO / "configs/tracks.yaml"),
                 "--set", "builder.walk_cut=0.3", "--set", "builder.min_length=1"]) == 0
    assert main(["evaluate", "--tracks", str(root / "tracks"), "--events",
                 str(root / "records"), "--out", str(root / "eval")]) == 0
    return root, record


def test_build_tracks_writes_one_submission_per_event(evaluated):
    root, record = evaluated
    files = sorted((root / "tracks").iterdir())
    assert [f.name for f in files] == ["event000000042-parameters.csv",
                                       "event000000042-tracks.csv"]   # no temp files left
    table = pd.read_csv(files[1])
    assert list(table.columns) == ["event_id", "hit_id", "track_id"]
    assert (table["event_id"] == 42).all()
    assert np.array_equal(table["hit_id"].to_numpy(), record.hit_id.numpy())
    assert np.array_equal(table["track_id"].to_numpy(), TrackBuilder().build(record))


def test_build_tracks_takes_a_tuned_config_and_refuses_an_untuned_one(evaluated, tmp_path,
                                                                       capsys):
    """A tuned tracks config (written by trkx.tracks.stage_config) builds with its values;
    the recipe's configs/tracks.yaml, whose walk cut is left to the tuner, is refused."""
    from trkx.tracks.stage_config import write_tuned_config

    root, record = evaluated
    chosen = TrackBuilder(walk_cut=0.5, min_length=6)
    tuned = write_tuned_config(tmp_path / "tuned", chosen, {}, {}, "a test")
    assert main(["build-tracks", "--events", str(root / "records"), "--out",
                 str(tmp_path / "t"), "--config", str(tuned)]) == 0
    table = pd.read_csv(tmp_path / "t" / "event000000042-tracks.csv")
    labels = chosen.build(record)
    assert np.array_equal(table["track_id"].to_numpy(), labels)
    assert len(np.unique(labels)) > len(np.unique(TrackBuilder(walk_cut=0.5).build(record)))
    config = str(REPO / "configs/tracks.yaml")
    assert main(["build-tracks", "--events", str(root / "records"), "--out",
                 str(tmp_path / "u"), "--config", config]) == 2
    assert "builder.walk_cut is null: tune the builder" in capsys.readouterr().err


def test_evaluate_round_trip(evaluated, capsys):
    root, _ = evaluated
    out = root / "eval"
    metrics = json.loads((out / "metrics.json").read_text())
    overall = metrics["overall"]
    for key in ("efficiency", "fake_rate", "duplicate_rate", "trackml_score",
                "n_signal_particles", "n_tracks", "efficiency_err"):
        assert key in overall
    assert overall["n_signal_particles"] > 0
    assert overall["efficiency"] == 1.0 and overall["fake_rate"] == 0.0
    assert overall["trackml_score"] > 0.99
    assert [e["event_id"] for e in metrics["events"]] == [42]
    assert metrics["edges"]["events"]["overall"]["efficiency"] == 1.0
    assert set(metrics["binned"]) == {"efficiency_vs_pt", "efficiency_vs_eta",
                                      "fake_rate_vs_eta", "duplicate_rate_vs_eta",
                                      "efficiency_vs_production_radius",
                                      "efficiency_vs_particle_hits", "efficiency_vs_vertex_z"}
    assert sum(metrics["binned"]["efficiency_vs_particle_hits"]["total"]) == \
        overall["n_signal_particles"]
    # the split by origin: every signal particle is prompt or secondary, all found here
    assert overall["n_signal_prompt"] + overall["n_signal_secondary"] == \
        overall["n_signal_particles"]
    assert overall["n_signal_prompt"] > 0 and overall["efficiency_prompt"] == 1.0
    # the split by vertex |z|: the four bins hold every signal particle, all found here
    bins = ("0_50", "50_100", "100_150", "150_up")
    assert sum(overall[f"n_signal_vz_{b}"] for b in bins) == overall["n_signal_particles"]
    assert sum(metrics["binned"]["efficiency_vs_vertex_z"]["total"]) == \
        overall["n_signal_particles"]
    assert all(overall[f"efficiency_vz_{b}"] in (1.0, None) for b in bins)
    assert metrics["anchors"]["cuts"]["pt_min"] == 0.9
    assert metrics["anchors"]["cuts"]["min_layers"] == 3
    by_radius = metrics["binned"]["efficiency_vs_production_radius"]
    assert sum(by_radius["total"]) == overall["n_signal_particles"]
    assert by_radius["total"][0] == overall["n_signal_prompt"]
    for name in ("efficiency_vs_pt", "efficiency_vs_eta", "fake_rate_vs_eta",
                 "duplicate_rate_vs_eta", "track_length", "efficiency_vs_production_radius",
                 "efficiency_vs_particle_hits", "efficiency_vs_vertex_z"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(pd.read_csv(out / "tracks.csv")) == overall["n_tracks"]
    # each candidate track's fitted parameters, against the truth of its particle
    fitted = pd.read_csv(root / "tracks" / "event000000042-parameters.csv")
    assert len(fitted) == overall["n_tracks"] and fitted["quality"].isna().all()
    resolution = metrics["resolution"]
    rows = pd.read_csv(out / "parameters.csv")                 # matched signal tracks
    assert len(rows) == overall["n_matched_signal_particles"]
    assert resolution["n_tracks"] == int((rows["eta"].abs() < 2).sum())
    assert (out / "pt_resolution.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_reports_bad_input(tmp_path, evaluated, capsys):
    root, _ = evaluated
    assert main(["evaluate", "--tracks", str(tmp_path / "none"), "--events",
                 str(root / "records"), "--out", str(tmp_path / "out")]) == 2
    assert "no such folder of track files" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    table = pd.read_csv(root / "tracks" / "event000000042-tracks.csv")
    table.loc[3, "event_id"] = 41
    table.to_csv(bad / "event000000042-tracks.csv", index=False)
    assert main(["evaluate", "--tracks", str(bad), "--events", str(root / "records"),
                 "--out", str(tmp_path / "out")]) == 2
    assert "line 5 has event_id 41" in capsys.readouterr().err
    assert not (tmp_path / "out" / "metrics.json").exists()
    table.loc[3, "event_id"] = 42
    table.loc[3, "hit_id"] = 10**9
    table.to_csv(bad / "event000000042-tracks.csv", index=False)
    assert main(["evaluate", "--tracks", str(bad), "--events", str(root / "records"),
                 "--out", str(tmp_path / "out")]) == 2
    assert "hit_id 1000000000 at line 5 is not a hit of the event" in capsys.readouterr().err
    assert main(["evaluate", "--tracks", str(root / "tracks"), "--events", str(tmp_path),
                 "--out", str(tmp_path / "out")]) == 2
    assert "no record event000000042*.pt" in capsys.readouterr().err
    assert main(["evaluate", "--tracks", str(root / "tracks"), "--events",
                 str(root / "records"), "--out", str(tmp_path / "out"),
                 "--set", "metrics.matching=best"]) == 2
    assert "matching 'best'" in capsys.readouterr().err


def test_evaluate_reads_trackml_csv_events(tmp_path, sample_prefix):
    from trkx.data.io import load_event

    truth, = load_event(sample_prefix, ["truth"], detector=None)
    tracks = tmp_path / "tracks"
    tracks.mkdir()
    # The truth as tracks, each noise hit a track of its own (one track of all noise hits
    # would be a fake).
    particle = truth["particle_id"].to_numpy()
    track_id = np.where(particle != 0, particle, -np.arange(1, len(particle) + 1))
    pd.DataFrame({"event_id": 1, "hit_id": truth["hit_id"], "track_id": track_id}).to_csv(
        tracks / "event000000001-tracks.csv", index=False)
    assert main(["evaluate", "--tracks", str(tracks), "--events", str(sample_prefix.parent),
                 "--out", str(tmp_path / "out")]) == 0
    overall = json.loads((tmp_path / "out" / "metrics.json").read_text())["overall"]
    assert overall["trackml_score"] == pytest.approx(1.0)
    assert overall["efficiency"] == 1.0 and overall["fake_rate"] == 0.0


@pytest.mark.subprocess
def test_notebook_runs_headless_on_the_evaluate_output(evaluated, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root, _ = evaluated
    monkeypatch.setenv("TRKX_EVAL_DIR", str(root / "eval"))
    notebook = nbformat.read(REPO / "notebooks" / "evaluate_tracking.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(root)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code"
               for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    written = sorted((root / "eval").glob("*.png"))
    assert len(images) == len(written) >= 9    # every plot, pT resolution and vertex |z| too


def test_no_track_long_enough_prints_na_rates(tmp_path, capsys):
    """Every hit its own track: no track reaches min_track_hits, so the fake and duplicate
    rates are undefined (n/a, null in metrics.json), the efficiency is 0, and nothing crashes."""
    for event_id, seed in ((42, 3), (43, 4)):
        record = scored_simulated_record(seed)
        record.event_id = torch.tensor(event_id)
        save_record(record, tmp_path / "records" / f"event{event_id:09d}.pt")
        (tmp_path / "tracks").mkdir(exist_ok=True)
        pd.DataFrame({"event_id": event_id, "hit_id": record.hit_id.numpy(),
                      "track_id": np.arange(record.num_nodes)}).to_csv(
            tmp_path / "tracks" / f"event{event_id:09d}-tracks.csv", index=False)
    capsys.readouterr()
    assert main(["evaluate", "--tracks", str(tmp_path / "tracks"), "--events",
                 str(tmp_path / "records"), "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "  fake rate        n/a" in out and "  duplicate rate   n/a" in out
    assert "  efficiency         0.00 +- 0.00 %" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["42"], ["43"])]
    # per event: efficiency, prompt, secondary, fake, duplicate
    assert [row[2] for row in rows] == ["0.0000"] * 2
    assert [row[4:6] for row in rows] == [["n/a", "n/a"]] * 2
    overall = json.loads((tmp_path / "eval" / "metrics.json").read_text())["overall"]
    assert overall["n_tracks"] == 0 and overall["n_signal_particles"] > 0
    assert overall["efficiency"] == 0.0
    assert overall["fake_rate"] is None and overall["duplicate_rate"] is None


def test_notebook_reads_the_folder_the_demo_writes():
    """The notebook's default EVAL_DIR (relative to the repository's root) is the evaluate
    folder of the `make train-demo` run: the workdir of the Makefile's `trkx run` line, laid
    out by trkx.pipeline."""
    import re

    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.steps import plan_steps

    demo = re.search(r"trkx run (\S+) --workdir (\S+)", (REPO / "Makefile").read_text())
    assert demo is not None, "Makefile: no `trkx run CONFIG --workdir DIR` demo line"
    steps = plan_steps(load_pipeline_config(str(REPO / demo.group(1))), Path(demo.group(2)))
    written = next(step.output for step in steps if step.name == "evaluate")
    notebook = json.loads((REPO / "notebooks" / "evaluate_tracking.ipynb").read_text())
    source = "\n".join("".join(cell["source"]) for cell in notebook["cells"]
                       if cell["cell_type"] == "code")
    default = re.search(r"""TRKX_EVAL_DIR["'],\s*["']([^"']+)["']""", source)
    assert default is not None, "notebook: no EVAL_DIR default"
    assert (REPO / default.group(1)).resolve() == (REPO / written).resolve()


def test_reused_out_folder_holds_and_evaluates_only_the_new_events(tmp_path, capsys):
    """build-tracks into a folder that holds tracks of other events removes those files
    (other files stay), so evaluate on it sees exactly the new input's events."""
    records = tmp_path / "records"
    for event_id, seed in ((42, 3), (43, 4)):
        record = scored_simulated_record(seed)
        record.event_id = torch.tensor(event_id)
        save_record(record, records / f"event{event_id:09d}.pt")
    config = ["--config", str(REPO / "configs/tracks.yaml"), "--set", "builder.walk_cut=0.3",
              "--set", "builder.min_length=1"]
    out = tmp_path / "tracks"
    assert main(["build-tracks", "--events", str(records), "--out", str(out), *config]) == 0
    (out / "notes.txt").write_text("mine")
    (records / "event000000043.pt").unlink()
    capsys.readouterr()
    assert main(["build-tracks", "--events", str(records), "--out", str(out), *config]) == 0
    assert f"{out}: removed 1 file(s) of an earlier run" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["event000000042-parameters.csv",
                                                     "event000000042-tracks.csv", "notes.txt"]
    assert main(["evaluate", "--tracks", str(out), "--events", str(records),
                 "--out", str(tmp_path / "eval")]) == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert [e["event_id"] for e in metrics["events"]] == [42]
    assert metrics["overall"]["n_events"] == 1
