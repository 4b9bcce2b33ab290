"""What `trkx --help` and every command's help show a new user: whole-pipeline inference first,
plain text (no reStructuredText markup from the docstrings they are built from)."""

from __future__ import annotations

import argparse
import re

from trkx.cli import build_parser

MARKUP = re.compile(r"``|:(mod|func|class|meth|attr|data|obj):`")


def all_parsers(parser: argparse.ArgumentParser, path: str = "trkx"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from all_parsers(sub, f"{path} {name}")


def test_top_level_help_lists_pipeline_inference_first() -> None:
    text = build_parser().format_help()
    commands = re.findall(r"^    (\S+)", text, flags=re.MULTILINE)
    assert commands[:3] == ["infer", "run", "train"]
    assert "tracks of TrackML events with a trained pipeline" in " ".join(text.split())


def test_no_help_text_shows_docstring_markup() -> None:
    parsers = dict(all_parsers(build_parser()))
    assert {"trkx infer", "trkx infer gnn", "trkx evaluate", "trkx run"} <= set(parsers)
    marked = {path: MARKUP.search(parser.format_help()).group(0)
              for path, parser in parsers.items() if MARKUP.search(parser.format_help())}
    assert marked == {}
