"""The errors a new user meets first: each ends with one line naming the file, key, option or
value, exit status 2, and nothing written."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from trkx.checkpoint import save_checkpoint
from trkx.cli import main
from trkx.config import load_config
from trkx.embedding.model import EmbeddingMLP
from trkx.filter.model import FilterMLP

from .test_cli_errors import error_line

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def not_checkpoints(folder: Path) -> dict[str, Path]:
    """Files a user may pass as a checkpoint by mistake, each of a different kind."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"text": folder / "notes.txt", "empty": folder / "empty.pt",
             "random": folder / "random.pt", "zip": folder / "archive.pt",
             "pickled object": folder / "object.pt"}
    files["text"].write_text("learning rate 3e-3 looked best\nnext: more layers\n")
    files["empty"].write_bytes(b"")
    files["random"].write_bytes(np.random.default_rng(7).integers(0, 256, 4096, np.uint8)
                                .tobytes())
    with zipfile.ZipFile(files["zip"], "w") as archive:     # a zip, but not torch.save's
        archive.writestr("model/weights.json", "{}")
    torch.save({"where": Path("/tmp")}, files["pickled object"])  # refused by weights_only
    return files


@pytest.mark.parametrize("kind, reason", [
    ("text", "(a text file: 'learning rate 3e-3 looked best')"),
    ("empty", "(empty file)"),
    ("random", "(binary data not written by torch.save)"),
    ("zip", "(a zip archive of model/weights.json, not one written by torch.save)"),
    ("pickled object", "(holds objects other than tensors and plain values: Unsupported "
                       "global: GLOBAL pathlib."),
])
def test_a_file_that_is_no_checkpoint_is_named_for_what_it_is(
        tmp_path: Path, capsys, kind: str, reason: str) -> None:
    path = not_checkpoints(tmp_path)[kind]
    (tmp_path / "events").mkdir()
    out = tmp_path / "out"
    assert main(["infer", "embedding", "--checkpoint", str(path), "--events",
                 str(tmp_path / "events"), "--out", str(out)]) == 2
    line = error_line(capsys)
    assert f"{path}: not a trkx checkpoint {reason}" in line, line
    assert line.endswith("give the file written by `trkx train embedding`")
    for noise in ("weights_only", "pop from empty list", "Traceback", "PytorchStreamReader"):
        assert noise not in line
    assert not out.exists()


def test_build_tracks_given_a_text_checkpoint(tmp_path: Path, capsys) -> None:
    text = tmp_path / "text.pt"
    text.write_text("gnn.pt is on the other machine\n")
    (tmp_path / "records").mkdir()
    assert main(["build-tracks", "--checkpoint", str(text), "--events",
                 str(tmp_path / "records"), "--out", str(tmp_path / "tracks")]) == 2
    assert (f"{text}: not a trkx checkpoint (a text file: 'gnn.pt is on the other machine'); "
            "give the file written by `trkx train gnn`") in error_line(capsys)
    assert not (tmp_path / "tracks").exists()


def test_a_truncated_checkpoint_reads_as_corrupted(tmp_path: Path, capsys) -> None:
    network = EmbeddingMLP(3, 8, 1, 4, True)
    path = save_checkpoint(tmp_path / "embedding.pt", "embedding", {"in_features": 3},
                           network.state_dict(), {}, {}, {})
    path.write_bytes(path.read_bytes()[:400])
    (tmp_path / "events").mkdir()
    assert main(["infer", "embedding", "--checkpoint", str(path), "--events",
                 str(tmp_path / "events"), "--out", str(tmp_path / "out")]) == 2
    line = error_line(capsys)
    assert f"{path}: not a readable trkx checkpoint (" in line
    assert line.endswith("corrupted? re-train with `trkx train embedding`")


def test_whole_pipeline_infer_with_a_text_gnn_checkpoint(sample_prefix: Path, tmp_path: Path,
                                                         capsys) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    save_checkpoint(checkpoints / "embedding.pt", "embedding",
                    {"in_features": 3, "hidden": 8, "layers": 1, "embedding_dim": 4,
                     "layer_norm": True}, EmbeddingMLP(3, 8, 1, 4, True).state_dict(),
                    {"radius": 0.1, "max_neighbours": 4}, {"data": {"use_cells": False}}, {})
    save_checkpoint(checkpoints / "filter.pt", "filter",
                    {"hit_features": 3, "cell_agreement": False, "hidden": 8, "layers": 1},
                    FilterMLP(3, False, 8, 1).state_dict(), {"score_cut": 0.5}, {}, {})
    (checkpoints / "gnn.pt").write_text("see the training log\n")
    events = tmp_path / "events"
    events.mkdir()
    (events / "event000000001-hits.csv.gz").symlink_to(f"{sample_prefix}-hits.csv.gz")
    out = tmp_path / "out"
    assert main(["infer", "--config", str(CONFIGS / "quickstart_hits_only.yaml"),
                 "--checkpoints", str(checkpoints), "--events", str(events),
                 "--out", str(out)]) == 2
    assert (f"{checkpoints / 'gnn.pt'}: not a trkx checkpoint (a text file: 'see the training "
            "log'); give the file written by `trkx train gnn`") in error_line(capsys)
    assert not out.exists()


def test_a_checkpoint_of_another_stage_takes_the_right_article(tmp_path: Path, capsys) -> None:
    network = EmbeddingMLP(3, 8, 1, 4, True)
    path = save_checkpoint(tmp_path / "embedding.pt", "embedding", {"in_features": 3},
                           network.state_dict(), {}, {}, {})
    (tmp_path / "records").mkdir()
    assert main(["infer", "gnn", "--checkpoint", str(path), "--events",
                 str(tmp_path / "records"), "--out", str(tmp_path / "out")]) == 2
    assert f"{path}: an embedding checkpoint, not a gnn one" in error_line(capsys)


def n_events_commands(tmp: Path) -> dict[str, list[str]]:
    """Every command that takes --n-events, with otherwise valid arguments."""
    events = tmp / "events"
    events.mkdir(exist_ok=True)
    out = str(tmp / "out")
    infer_stage = ["--checkpoint", str(tmp / "model.pt"), "--events", str(events), "--out", out]
    return {
        "simulate": ["simulate", "--out", out],
        "infer": ["infer", "--config", str(CONFIGS / "quickstart.yaml"), "--checkpoints",
                  str(tmp), "--events", str(events), "--out", out],
        "infer embedding": ["infer", "embedding", *infer_stage],
        "infer filter": ["infer", "filter", *infer_stage],
        "infer gnn": ["infer", "gnn", *infer_stage],
        "partition": ["partition", "--events", str(events)],
    }


def parsers_with_n_events() -> set[str]:
    """The commands whose parser has an option stored in ``n_events``."""
    import argparse

    from trkx.cli import build_parser

    found = set()

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())
            elif action.dest == "n_events":
                found.add(name)

    walk(build_parser(), "")
    return found


@pytest.mark.parametrize("value", ["0", "-3"])
def test_n_events_below_one_names_the_option(tmp_path: Path, capsys, value: str) -> None:
    commands = n_events_commands(tmp_path)
    assert parsers_with_n_events() == set(commands)      # a new command gets tested here too
    for name, argv in commands.items():
        assert main([*argv, "--n-events", value]) == 2, name
        assert error_line(capsys) == f"trkx {name.split()[0]}: error: --n-events must be >= 1, " \
                                     f"got {value}", name
        assert not (tmp_path / "out").exists(), name


def embedding_checkpoint(path: Path) -> Path:
    """A tiny embedding checkpoint whose stored config is configs/embedding.yaml."""

    network = EmbeddingMLP(3, 8, 1, 4, True)
    return save_checkpoint(path, "embedding", {"in_features": 3, "hidden": 8, "layers": 1,
                                               "embedding_dim": 4, "layer_norm": True},
                           network.state_dict(), {"radius": 0.1, "max_neighbours": 4},
                           load_config(CONFIGS / "embedding.yaml"), {})


def test_a_bad_set_value_names_the_set_in_every_command(sample_prefix: Path, tmp_path: Path,
                                                        capsys) -> None:
    events, out = tmp_path / "events", tmp_path / "out"
    events.mkdir()
    (events / "event000000001-hits.csv.gz").symlink_to(f"{sample_prefix}-hits.csv.gz")
    checkpoint = embedding_checkpoint(tmp_path / "embedding.pt")
    pipeline = str(CONFIGS / "quickstart.yaml")
    infer_stage = ["--checkpoint", str(checkpoint), "--events", str(events), "--out", str(out)]
    cases = [
        (["run", pipeline, "--workdir", str(out), "--dry-run", "--set", "events.pileup=abc"],
         "trkx run: error: --set events.pileup=abc: key 'pileup' must be a number, got 'abc' "
         "(str)"),
        (["run", pipeline, "--workdir", str(out), "--set", "events.pileup=-4"],
         "trkx run: error: --set events.pileup=-4: pileup must be positive"),
        (["run", pipeline, "--workdir", str(out), "--set", "evnts.pileup=3"],
         "trkx run: error: --set evnts.pileup=3: unknown section 'evnts' (did you mean "
         "'events'?)"),
        (["train", "embedding", "--checkpoint", str(out / "e.pt"), "--set", "model.hidden=8",
          "--set", f"data.train_dir={events}", "--set", "model.hidden=abc"],
         "trkx train: error: --set model.hidden=abc: key 'hidden' must be an int, got 'abc' "
         "(str)"),
        (["train", "gnn", "--checkpoint", str(out / "g.pt"), "--set", f"data.train_dir={events}",
          "--set", "data.train_events=0"],
         "trkx train: error: --set data.train_events=0: train_events must be >= 1 or null, "
         "got 0"),
        (["infer", "embedding", *infer_stage, "--set", "inference.radius=abc"],     # stored config
         "trkx infer: error: --set inference.radius=abc: key 'radius' must be a number or null, "
         "got 'abc' (str)"),
        (["infer", "embedding", "--config", str(CONFIGS / "embedding.yaml"), *infer_stage,
          "--set", "inference.max_neighbours=1.5"],
         "trkx infer: error: --set inference.max_neighbours=1.5: key 'max_neighbours' must be an "
         "int or null, got 1.5 (float)"),
        (["infer", "--config", pipeline, "--checkpoints", str(tmp_path), "--events",
          str(events), "--out", str(out), "--set", "inference.precision=half"],
         "trkx infer: error: --set inference.precision=half: precision must be one of fp32, "
         "bf16, not 'half'"),
        (["evaluate", "--tracks", str(events), "--events", str(events), "--out", str(out),
          "--config", str(CONFIGS / "tracks.yaml"), "--set", "metrics.pt_min=abc"],
         "trkx evaluate: error: --set metrics.pt_min=abc: key 'pt_min' must be a number, got "
         "'abc' (str)"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert error_line(capsys).startswith(message), argv
        assert not out.exists(), argv


def test_a_bad_value_of_the_file_still_names_the_file(tmp_path: Path, capsys) -> None:
    import yaml

    config = load_config(CONFIGS / "gnn.yaml")          # with the trainer block it includes
    config["model"]["hidden"] = "wide"
    path = tmp_path / "gnn.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", "gnn", "--config", str(path), "--checkpoint", str(tmp_path / "g.pt"),
                 "--set", "model.n_graph_iters=2"]) == 2
    assert f"{path}: model: key 'hidden' must be an int, got 'wide' (str)" in error_line(capsys)


# --- events without truth, folders that are not there -------------------------------------

def event_folder(folder: Path, sample_prefix: Path, parts: tuple[str, ...],
                 ids: tuple[int, ...] = (1, 2)) -> Path:
    """``folder`` with the real sample event's ``parts`` under each event id (links)."""
    folder.mkdir(parents=True)
    for event_id in ids:
        for part in parts:
            (folder / f"event{event_id:09d}-{part}.csv.gz").symlink_to(
                f"{sample_prefix}-{part}.csv.gz")
    return folder


COMPLETE = ("hits", "cells", "particles", "truth")
NO_CELLS = ("hits", "particles", "truth")


def test_training_on_hit_files_alone_fails_before_lightning(trackml_dir: Path, tmp_path: Path,
                                                           capsys) -> None:
    hits_only = trackml_dir / "kaggle_hits"           # the real Kaggle hit files: no truth
    run = tmp_path / "run"
    assert main(["train", "embedding", "--config", str(CONFIGS / "embedding.yaml"),
                 "--checkpoint", str(run / "embedding.pt"), "--set",
                 f"data.train_dir={hits_only}", "--set", "data.train_events=2"]) == 2
    line = error_line(capsys)
    assert line.startswith(f"trkx train: error: training needs truth files: {hits_only}/"
                           "event000000002-truth.csv[.gz] missing (data.train_dir; 2 of 2 "
                           "event(s) have none)"), line
    assert not run.exists()                           # no checkpoint, no embedding.run/


def test_a_validation_folder_without_truth_is_named(sample_prefix: Path, tmp_path: Path,
                                                    capsys) -> None:
    train = event_folder(tmp_path / "train", sample_prefix, COMPLETE)
    val = event_folder(tmp_path / "val", sample_prefix, ("hits", "cells"), ids=(5,))
    run = tmp_path / "run"
    assert main(["train", "embedding", "--checkpoint", str(run / "embedding.pt"),
                 "--set", f"data.train_dir={train}", "--set", f"data.val_dir={val}",
                 "--set", "data.train_events=2"]) == 2
    assert error_line(capsys).startswith(
        f"trkx train: error: training needs truth files: {val}/event000000005-truth.csv[.gz] "
        "missing (data.val_dir; 1 of 1 event(s) have none)")
    assert not run.exists()


def test_a_cells_model_on_events_without_cells_is_named(sample_prefix: Path, tmp_path: Path,
                                                        capsys) -> None:
    train = event_folder(tmp_path / "train", sample_prefix, NO_CELLS)
    run = tmp_path / "run"
    assert main(["train", "embedding", "--checkpoint", str(run / "embedding.pt"),
                 "--set", f"data.train_dir={train}", "--set", "data.train_events=1"]) == 2
    line = error_line(capsys)
    assert f"needs cell files: {train}/event000000001-cells.csv[.gz] missing (data.train_dir" \
        in line and "--set data.use_cells=false" in line
    assert not run.exists()


def test_records_without_truth_do_not_train(sample_prefix: Path, tmp_path: Path,
                                            capsys) -> None:
    from trkx.data.record import save_record

    from .gnn_records import graph_record

    records = tmp_path / "records"        # what `trkx infer embedding` writes for hit files
    for event_id in (3, 4):
        record = graph_record(sample_prefix, (0.0, 0.5), 1.0, seed=0)
        del record.particle_id, record.track_edges
        record.event_id = torch.tensor(event_id)
        save_record(record, records / f"event{event_id:09d}.pt")
    run = tmp_path / "run"
    assert main(["train", "embedding", "--checkpoint", str(run / "embedding.pt"),
                 "--set", f"data.train_dir={records}", "--set", "data.train_events=1"]) == 2
    assert f"training needs truth: {records}: event 3 has no particle_id, track_edges, " \
           "signal_hit (data.train_dir;" in error_line(capsys)
    assert not run.exists()


def pipeline_on(tmp_path: Path, base: str, **folders: str) -> Path:
    """The shipped pipeline ``base`` on existing event folders (relative to the pipeline file),
    its stage configs from configs/."""
    import yaml

    config = yaml.safe_load((CONFIGS / base).read_text())
    config["events"] = {"simulate": False, **{f"{k}_dir": v for k, v in folders.items()}}
    for plan in [*config["stages"].values(), config["tracks"]]:
        plan["config"] = str(CONFIGS / plan["config"])
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_fails(pipeline: Path, workdir: Path, capsys, *extra: str) -> str:
    """``trkx run`` (dry and real) ends with exit 2, no plan printed and no workdir: the line."""
    lines = set()
    for dry in (["--dry-run"], []):
        assert main(["run", str(pipeline), "--workdir", str(workdir), *dry, *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        err = [line for line in captured.err.splitlines() if line.strip()]
        assert len(err) == 1, err
        lines.add(err[0])
        assert not workdir.exists()
    assert len(lines) == 1, lines                        # the same check before a real run
    return lines.pop()


def test_run_checks_the_given_event_folders(sample_prefix: Path, trackml_dir: Path,
                                            tmp_path: Path, capsys) -> None:
    event_folder(tmp_path / "train", sample_prefix, NO_CELLS, ids=(1, 2))
    event_folder(tmp_path / "val", sample_prefix, NO_CELLS, ids=(3,))
    event_folder(tmp_path / "test", sample_prefix, NO_CELLS, ids=(4,))
    (tmp_path / "empty").mkdir()
    workdir = tmp_path / "work"
    hits_only = str(trackml_dir / "kaggle_hits")
    cases = [
        ({"train": "missing", "val": "val", "test": "test"},
         f"{tmp_path / 'missing'}: no such events folder (events.train_dir)"),
        ({"train": "train", "val": "empty", "test": "test"},
         f"{tmp_path / 'empty'}: no TrackML events (event*-hits.csv[.gz]) (events.val_dir)"),
        ({"train": hits_only, "val": "val", "test": "test"},
         f"training needs truth files: {hits_only}/event000000002-truth.csv[.gz] missing "
         "(events.train_dir; 11 of 11 event(s) have none)"),
        ({"train": "train", "val": hits_only, "test": "test"},
         "validation needs truth files: "),
        ({"train": "train", "val": "val", "test": hits_only},
         f"evaluating the test events needs truth files: {hits_only}/event000000002-truth"
         ".csv[.gz] missing (events.test_dir; 11 of 11 event(s) have none); every `trkx run` "
         "ends by evaluating its test events; run the trained pipeline on events without "
         "truth with `trkx infer --checkpoints WORKDIR/checkpoints`"),
    ]
    for folders, message in cases:
        pipeline = pipeline_on(tmp_path, "quickstart_hits_only.yaml", **folders)
        line = run_fails(pipeline, workdir, capsys)
        assert line.startswith(f"trkx run: error: {message}"), (folders, line)
    # the cell features of configs/quickstart.yaml need cells files: named before any step
    pipeline = pipeline_on(tmp_path, "quickstart.yaml", train="train", val="val", test="test")
    line = run_fails(pipeline, workdir, capsys)
    assert line.startswith(f"trkx run: error: the embedding's data.use_cells: true needs cell "
                           f"files: {tmp_path / 'train'}/event000000001-cells.csv[.gz] missing "
                           "(events.train_dir; 2 of 2 event(s) have none)"), line
    # --set events.* overrides go through the same check
    line = run_fails(pipeline_on(tmp_path, "quickstart_hits_only.yaml", train="train",
                                 val="val", test="test"), workdir, capsys,
                     "--set", f"events.val_dir={hits_only}")
    assert line.startswith("trkx run: error: validation needs truth files: ")


def test_run_accepts_complete_event_folders(sample_prefix: Path, tmp_path: Path,
                                            capsys) -> None:
    for split, ids in (("train", (1, 2)), ("val", (3,)), ("test", (4,))):
        event_folder(tmp_path / split, sample_prefix, COMPLETE, ids=ids)
    workdir = tmp_path / "work"
    for base in ("quickstart.yaml", "quickstart_hits_only.yaml"):
        pipeline = pipeline_on(tmp_path, base, train="train", val="val", test="test")
        assert main(["run", str(pipeline), "--workdir", str(workdir), "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert f"--set data.train_dir={tmp_path / 'train'}" in plan and "simulate" not in plan
        assert not workdir.exists()


HEAVY = ("torch", "lightning", "pytorch_lightning", "torch_geometric")
#: Runs each command line of argv[1] (JSON) in this fresh process and reports, per command, its
#: exit status, its stderr and the heavy modules imported so far.
WRAPPER = """
import contextlib, io, json, sys
from trkx.cli import main
report = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    report.append([code, err.getvalue(), [m for m in HEAVY if m in sys.modules]])
print(json.dumps(report))
""".replace("HEAVY", repr(HEAVY))


@pytest.mark.subprocess
def test_a_missing_folder_fails_before_the_heavy_imports(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys
    import time

    missing = str(tmp_path / "nonexistent")
    out = tmp_path / "out"
    pipeline = pipeline_on(tmp_path, "quickstart.yaml", train="nonexistent", val="val",
                           test="test")
    commands = {
        "infer": (["infer", "--config", str(CONFIGS / "quickstart.yaml"), "--checkpoints",
                   str(tmp_path), "--events", missing, "--out", str(out)], "--events"),
        "infer embedding": (["infer", "embedding", "--checkpoint", str(tmp_path / "e.pt"),
                             "--events", missing, "--out", str(out)], "--events"),
        "infer gnn": (["infer", "gnn", "--config", str(CONFIGS / "gnn.yaml"), "--events",
                       missing, "--out", str(out)], "--events"),
        "train embedding": (["train", "embedding", "--checkpoint", str(out / "e.pt"),
                             "--set", f"data.train_dir={missing}"], "data.train_dir"),
        "train gnn": (["train", "gnn", "--checkpoint", str(out / "g.pt"), "--set",
                       f"data.train_dir={tmp_path}", "--set", f"data.val_dir={missing}"],
                      "data.val_dir"),
        "evaluate": (["evaluate", "--tracks", missing, "--events", str(tmp_path), "--out",
                      str(out)], "--tracks"),
        "evaluate events": (["evaluate", "--tracks", str(tmp_path), "--events", missing,
                             "--out", str(out)], "--events"),
        "build-tracks": (["build-tracks", "--events", missing, "--out", str(out)], "--events"),
        "run --dry-run": (["run", str(pipeline), "--workdir", str(out), "--dry-run"],
                          "events.train_dir"),
        "run": (["run", str(pipeline), "--workdir", str(out)], "events.train_dir"),
    }
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps([argv for argv, _ in commands.values()])],
        capture_output=True, text=True, timeout=120, cwd=CONFIGS.parent,
        env={**os.environ, "PYTHONPATH": str(CONFIGS.parent)})
    seconds = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    for (name, (_, key)), (code, err, heavy) in zip(commands.items(),
                                                     json.loads(result.stdout)):
        assert code == 2, (name, err)
        assert err.count("\n") == 1 and f"{missing}: " in err and f"({key})" in err, (name, err)
        assert heavy == [], (name, heavy)           # torch, Lightning, PyG never imported
    assert not out.exists()
    assert seconds < 60, seconds       # ten commands; one heavy import alone takes ~5-10 s here
