"""User errors about event folders: training on events without truth, `trkx run` on folders
that are missing, empty or incomplete, and missing folders reported before the heavy imports.
Each ends with one line naming the folder, file or key, exit status 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trkx.cli import main

from .test_cli_errors import error_line

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


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
