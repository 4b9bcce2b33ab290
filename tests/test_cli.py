"""The foundation's command line: info, score, demo and clean errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trkx.cli import main
from trkx.data.io import load_event


def test_info_prints_the_counts(sample_prefix: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(sample_prefix)]) == 0
    out = capsys.readouterr().out
    assert "hits                    5,527" in out
    assert "cells                  18,564" in out
    assert "particles                 548  (468 with hits" in out
    # the count `trkx infer` evaluates: of the 56 above 1 GeV, 54 have >= 3 hits on >= 3 layers
    assert "signal particles           54  (trkx's count" in out
    assert "noise fraction         15.00%" in out
    assert "pixel barrel                1,337" in out


def test_score_prints_the_score_last(tmp_path: Path, sample_prefix: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    (truth,) = load_event(sample_prefix, ["truth"])
    path = tmp_path / "submission.csv"
    pd.DataFrame({"event_id": 1, "hit_id": truth["hit_id"],
                  "track_id": truth["particle_id"]}).to_csv(path, index=False)
    assert main(["score", str(path), str(sample_prefix)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "score 1.000000000"
    pd.DataFrame({"hit_id": truth["hit_id"], "track_id": 0}).to_csv(path, index=False)
    assert main(["score", str(path), str(sample_prefix)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "score 0.000000000"


def test_score_names_the_missing_submission_first_and_counts_track_ids(
        tmp_path: Path, sample_prefix: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "none" / "event000000001-tracks.csv"
    assert main(["score", str(missing), str(tmp_path / "event000000009")]) == 2
    assert f"{missing}: no such submission file" in capsys.readouterr().err
    (truth,) = load_event(sample_prefix, ["truth"])
    path = tmp_path / "submission.csv"
    track = np.where(truth["particle_id"].to_numpy() == 0, -np.arange(len(truth)),
                     truth["particle_id"].to_numpy())       # each noise hit an id of its own
    pd.DataFrame({"hit_id": truth["hit_id"], "track_id": track}).to_csv(path, index=False)
    assert main(["score", str(path), str(sample_prefix)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    ids = len(np.unique(track))
    long = int((pd.Series(track).value_counts() >= 3).sum())
    assert f"{ids:,d} track ids ({long:,d} tracks of >= 3 hits" in first


def test_score_rejects_a_submission_for_another_event(tmp_path: Path, sample_prefix: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "submission.csv"
    pd.DataFrame({"event_id": [5], "hit_id": [1], "track_id": [1]}).to_csv(path, index=False)
    assert main(["score", str(path), str(sample_prefix)]) == 2
    assert "no rows for event 1" in capsys.readouterr().err


def test_missing_event_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(tmp_path / "event000000001")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trkx info: error:") and "event000000001-hits.csv" in err


@pytest.mark.subprocess
def test_console_entry_point_and_demo(sample_prefix: Path, tmp_path: Path) -> None:
    """`trkx demo` (what `make demo` runs) is `trkx infer` of the shipped models with its
    evaluation: on the real sample event, its tracks, and the metrics the notebook reads."""
    out = tmp_path / "demo"
    result = subprocess.run([sys.executable, "-m", "trkx", "--threads", "1", "demo", "--events",
                             str(sample_prefix.parent), "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    tracks = pd.read_csv(out / "event000000001-tracks.csv")
    assert len(tracks) == len(pd.read_csv(f"{sample_prefix}-hits.csv.gz"))
    metrics = json.loads((out / "evaluate" / "metrics.json").read_text())
    assert metrics["overall"]["efficiency"] > 0.9


QUICK_ENTRY = ("import atexit, sys\n"
               "atexit.register(lambda: print('shutdown ran', flush=True))\n"
               "sys.argv = ['trkx', *sys.argv[1:]]\n"
               "from trkx.cli import main\n"
               "sys.exit(main())\n")


@pytest.mark.subprocess
@pytest.mark.parametrize("arguments, status, quick", [
    (["info", "{prefix}"], 0, True),
    (["info", "{prefix}_missing"], 2, True),
    (["simulate", "--out", "{tmp}/sim", "--n-events", "0"], 2, False),
])
def test_an_inference_command_ends_its_process_without_the_shutdown(
        sample_prefix: Path, tmp_path: Path, arguments: list[str], status: int,
        quick: bool) -> None:
    """At the process entry, `trkx info` (as `trkx infer`) ends its process when its handler
    returns: the exit handlers do not run, the piped output is whole and the exit status kept,
    also for an error; a training-side command (`trkx simulate`) shuts the interpreter down as
    usual."""
    arguments = [a.format(prefix=sample_prefix, tmp=tmp_path) for a in arguments]
    ran = subprocess.run([sys.executable, "-c", QUICK_ENTRY, *arguments],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == status, ran.stderr
    assert ("shutdown ran" in ran.stdout) is not quick
    if status == 0:
        assert "signal particles           54" in ran.stdout
    else:
        assert ran.stderr.startswith(f"trkx {arguments[0]}: error:")


def test_demo_without_events_names_trkx_data(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture,
                                             tmp_path: Path) -> None:
    monkeypatch.delenv("TRKX_DATA", raising=False)
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trkx demo: error:") and "TRKX_DATA" in err and "\n" not in err
    assert not (tmp_path / "demo").exists()


@pytest.mark.subprocess
def test_help_imports_no_heavy_package() -> None:
    """Every command registers without torch, Lightning, pandas or FAISS: `trkx --help` is fast."""
    code = ("import sys; from trkx.cli import build_parser; build_parser(); "
            "print(sorted({'torch', 'pytorch_lightning', 'pandas', 'faiss', 'scipy'} "
            "& set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"



def _subcommands(parser) -> dict:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _readme_commands() -> list[str]:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Commands", 1)[1].split("\n#", 1)[0]
    return [row.split("`")[1] for row in section.splitlines() if row.startswith("| `trkx ")]


def test_the_readme_command_table_matches_every_help() -> None:
    """Every command has a README row; each row names only options that its command's --help
    shows, every required option, and the positional arguments by their --help names."""
    import argparse
    import re

    from trkx.cli import build_parser

    commands = _subcommands(build_parser())
    rows = _readme_commands()
    assert {row.split()[1] for row in rows} == set(commands)
    for row in rows:
        words = row.split()[1:]
        parsers = [commands[words[0]]]
        if len(words) > 1 and words[1] == "STAGE":
            parsers = list(_subcommands(parsers[0]).values())
            assert sorted(_subcommands(commands[words[0]])) == ["embedding", "filter", "gnn"]
        flags = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", row))
        for parser in parsers:
            visible = {s for a in parser._actions if a.help != argparse.SUPPRESS
                       for s in a.option_strings}
            required = {a.option_strings[0] for a in parser._actions
                        if a.required and a.option_strings}
            assert flags <= visible, (row, flags - visible)
            assert required <= flags, (row, required - flags)
            for action in parser._actions:
                if not action.option_strings and action.help != argparse.SUPPRESS and \
                        not isinstance(action, argparse._SubParsersAction):
                    assert (action.metavar or action.dest.upper()) in words, (row, action.dest)


def test_infer_usage_gives_both_forms_and_no_required_stage(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["infer", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert usage.startswith("usage: trkx infer --events DIR --out DIR")
    assert "trkx infer STAGE --checkpoint FILE --events DIR --out DIR" in usage
    assert not usage.splitlines()[0].rstrip().endswith("STAGE ...")
