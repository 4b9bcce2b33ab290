"""`trkx infer` opens each file of a model set once: the checksums, the configs, the quality
models and the checkpoints all come from one read (trkx.files.read_once)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from trkx.cli import main
from trkx.files.read_once import file_bytes

MODELS = Path(__file__).resolve().parents[1] / "trkx" / "models"


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("x: 1\n")
    assert file_bytes(path) == b"x: 1\n"
    path.write_text("x: 22\n")                # another size: another key
    assert file_bytes(path) == b"x: 22\n"


def test_infer_opens_each_model_file_once(sample_prefix: Path, tmp_path: Path,
                                          monkeypatch) -> None:
    from trkx.files import read_once

    monkeypatch.setattr(read_once, "_BYTES", {})     # as a fresh process: nothing read yet
    opened: collections.Counter[str] = collections.Counter()
    watching = [True]

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], (str, Path)):
            path = str(args[0])
            if path.startswith(str(MODELS)) and path.endswith((".yaml", ".pt", ".json")):
                opened[Path(path).name] += 1

    sys.addaudithook(hook)               # audit hooks cannot be removed: the flag ends it
    try:
        assert main(["infer", "--events", str(sample_prefix.parent), "--out",
                     str(tmp_path / "out"), "--no-evaluate"]) == 0
    finally:
        watching[0] = False
    assert {"gnn.pt", "filter.pt", "embedding.pt", "pipeline.yaml", "tracks.yaml",
            "short_quality.json", "second_quality.json"} <= set(opened)
    assert set(opened.values()) == {1}, opened
