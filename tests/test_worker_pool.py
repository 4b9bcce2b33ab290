"""trkx.runtime.parallel.worker_pool: a pool whose body has every result can end its idle
workers at once (no interpreter shutdown in each), and a normal pool still shuts them down."""

from __future__ import annotations

import atexit
import os
from pathlib import Path

import pytest

from trkx.runtime.parallel import worker_pool


def _mark_exit(folder: str) -> None:
    """Worker initializer: write ``folder/PID`` when the worker's interpreter shuts down."""
    atexit.register(lambda: Path(folder, str(os.getpid())).write_text("shut down"))


def _square(value: int) -> tuple[int, int]:
    return value * value, os.getpid()


@pytest.mark.parametrize("end_when_done", [False, True])
def test_the_pool_returns_every_result_and_ends_its_workers_as_told(
        tmp_path: Path, end_when_done: bool) -> None:
    with worker_pool(2, _mark_exit, (str(tmp_path),), context="spawn",
                     end_when_done=end_when_done) as pool:
        results = [future.result() for future in [pool.submit(_square, v) for v in range(6)]]
    assert [square for square, _ in results] == [v * v for v in range(6)]
    pids = {pid for _, pid in results}
    for pid in pids:               # every worker has ended and was reaped either way
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    marked = {int(p.name) for p in tmp_path.iterdir()}
    if end_when_done:
        assert marked == set()     # ended without running their interpreter's shutdown
    else:
        assert pids <= marked      # each shut its interpreter down (atexit ran)
