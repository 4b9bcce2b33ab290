"""Every stage's cli module implements the StageCommands protocol: its members, and functions
with the protocol's parameters (names and order)."""

from __future__ import annotations

import inspect

import pytest

from trkx.cli.stages import STAGES, stage_module
from trkx.stages.commands import StageCommands

CONSTANTS = ("NAME", "SECTIONS", "DEFAULT_CONFIG")
FUNCTIONS = ("check_config", "count_events", "train", "infer")


def test_the_protocol_lists_these_members() -> None:
    declared = {name for name in vars(StageCommands) if not name.startswith("_")}
    assert declared | set(StageCommands.__annotations__) == {*CONSTANTS, *FUNCTIONS}


@pytest.mark.parametrize("stage", STAGES)
def test_stage_module_implements_the_protocol(stage: str) -> None:
    module = stage_module(stage)
    assert module.NAME == stage
    assert isinstance(module.SECTIONS, tuple) and isinstance(module.DEFAULT_CONFIG, str)
    for name in FUNCTIONS:
        expected = list(inspect.signature(getattr(StageCommands, name)).parameters)[1:]
        assert list(inspect.signature(getattr(module, name)).parameters) == expected, name
