"""``$TRKX_DATA`` in pipeline configs: expanded when set, a one-line error naming it when not
(only `make` sets it; a bare shell used to get a literal '$TRKX_DATA' folder that did not
exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.config import ConfigError
from trkx.pipeline.config import resolve_relative


def test_set_trkx_data_expands(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRKX_DATA", str(tmp_path))
    assert resolve_relative("$TRKX_DATA/kaggle_hits", Path("/elsewhere")) == \
        tmp_path / "kaggle_hits"
    assert resolve_relative("${TRKX_DATA}/x", Path("/elsewhere")) == tmp_path / "x"
    assert resolve_relative("events/test", Path("/base")) == Path("/base/events/test")


def test_unset_trkx_data_is_named(monkeypatch) -> None:
    monkeypatch.delenv("TRKX_DATA", raising=False)
    with pytest.raises(ConfigError, match=r"\$TRKX_DATA/kaggle_hits: \$TRKX_DATA is not set"):
        resolve_relative("$TRKX_DATA/kaggle_hits", Path("."))
