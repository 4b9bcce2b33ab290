"""The errors a new user meets first: each ends with one line naming the file, key, option or
value, exit status 2, and nothing written."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from trkx.cli import main
from trkx.config import load_config
from trkx.embedding.model import EmbeddingMLP
from trkx.files.checkpoint import save_checkpoint
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


def test_build_tracks_given_a_text_quality_model(tmp_path: Path, capsys) -> None:
    """A tuned tracks config whose quality model's file is not one: one line naming the file,
    exit 2, nothing written."""
    (tmp_path / "quality.json").write_text("quality.json is on the other machine\n")
    config = tmp_path / "tracks.yaml"
    config.write_text("builder:\n  walk_cut: 0.5\n  min_length: 3\n  quality_cut: 0.3\n"
                      "  quality: quality.json\n")
    (tmp_path / "records").mkdir()
    assert main(["build-tracks", "--config", str(config), "--events",
                 str(tmp_path / "records"), "--out", str(tmp_path / "tracks")]) == 2
    assert f"{tmp_path / 'quality.json'}: not a quality model" in error_line(capsys)
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


def test_a_builder_key_set_outside_its_section_is_refused(tmp_path: Path, capsys) -> None:
    """`--set extend_window_xy=2` (the builder's key without `builder.`) would build the
    same tracks as without it; it is named instead."""
    (tmp_path / "records").mkdir()
    assert main(["build-tracks", "--config", str(CONFIGS / "tracks.yaml"), "--events",
                 str(tmp_path / "records"), "--out", str(tmp_path / "tracks"),
                 "--set", "extend_window_xy=2.0"]) == 2
    line = error_line(capsys)
    assert "unknown key(s) extend_window_xy" in line and "builder.KEY=VALUE" in line
    assert not (tmp_path / "tracks").exists()


HITS_HEADER = "hit_id,x,y,z,volume_id,layer_id,module_id\n"


@pytest.mark.parametrize("rows, message", [
    ("1,-69.2717,-0.812497,-1502.5,7,2,1\n2,1e30,-8.30235,-1502.5,7,2,1\n",
     "event000000001-hits.csv: x = 1e+30 mm at line 3 lies beyond any detector"),
    ("", "event000000001-hits.csv: no hits (the file holds its header only)"),
])
def test_a_hits_file_no_detector_made_is_one_line(tmp_path: Path, capsys, rows: str,
                                                  message: str) -> None:
    events, out = tmp_path / "events", tmp_path / "out"
    events.mkdir()
    (events / "event000000001-hits.csv").write_text(HITS_HEADER + rows)
    assert main(["infer", "--events", str(events), "--out", str(out)]) == 2
    assert message in error_line(capsys)
    assert not out.exists()


def test_an_out_folder_that_cannot_be_made_is_named_before_the_work(tmp_path: Path,
                                                                    sample_prefix: Path,
                                                                    capsys) -> None:
    (tmp_path / "a_file").write_text("not a folder\n")
    assert main(["infer", "--events", str(sample_prefix.parent), "--out",
                 str(tmp_path / "a_file" / "out")]) == 2
    line = error_line(capsys)
    assert "a_file/out: cannot be made a folder (its parent" in line and "(--out)" in line


def test_tune_tracks_given_records_without_scores(sample_prefix: Path, tmp_path: Path,
                                                  capsys) -> None:
    """`trkx tune-tracks` on records the GNN has not scored: one line naming the record and
    what it lacks, exit 2, no tuned config written."""
    from tests.gnn_records import graph_record
    from trkx.data.record import save_record

    records = tmp_path / "val"
    save_record(graph_record(sample_prefix, (0.0, 1.0), 1.0, seed=1),
                records / "event000000009.pt")
    out = tmp_path / "tuned"
    assert main(["tune-tracks", "--config", str(CONFIGS / "tracks.yaml"), "--events",
                 str(records), "--out", str(out)]) == 2
    line = error_line(capsys)
    assert f"{records / 'event000000009.pt'}: the tuner needs GNN scores and truth" in line
    assert not out.exists()
