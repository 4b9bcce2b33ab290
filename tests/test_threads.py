"""--threads / TRKX_THREADS reach torch, numba and the commands `trkx run` starts."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from trkx.cli import main
from trkx.runtime.threads import available_cores, choose_threads


def torch_threads(*args: str, env: dict[str, str]) -> int:
    code = ("import sys, torch; from trkx.runtime.threads import configure_threads; "
            "configure_threads(int(sys.argv[1]) if len(sys.argv) > 1 else None); "
            "print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                         text=True, check=True).stdout
    return int(out)


def clean_env() -> dict[str, str]:
    """This environment without the thread variables configure_threads sets."""
    import os

    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "TRKX_THREADS")
    return {k: v for k, v in os.environ.items() if k not in names}


def numba_threads(code: str, env: dict[str, str]) -> tuple[int, int]:
    """(numba.get_num_threads(), numba's pool size) after ``code`` ran in a fresh process."""
    code += "; import numba; print(numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[-2]), int(out[-1])


@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_numba_gets_the_count() -> None:
    env = clean_env()
    # The command line: the pool itself is sized before numba is imported.
    cli = "from trkx.cli import main; main(['--threads', '1', 'info', 'no/such/event'])"
    assert numba_threads(cli, env) == (1, 1)
    assert numba_threads("from trkx.runtime.threads import configure_threads; "
                         "configure_threads(None)",
                         {**env, "TRKX_THREADS": "1"}) == (1, 1)
    # numba imported first (pool of 2): at most the count of its threads work, and a later
    # compilation does not fail on a changed NUMBA_NUM_THREADS.
    late = ("import numba, numpy; from trkx.runtime.threads import configure_threads; "
            "configure_threads(1); "
            "numba.njit(parallel=True)(lambda a: a.sum())(numpy.ones(10))")
    assert numba_threads(late, {**env, "NUMBA_NUM_THREADS": "2"}) == (1, 2)


def test_the_rule(monkeypatch) -> None:
    monkeypatch.delenv("TRKX_THREADS", raising=False)
    assert choose_threads(None) == available_cores()
    monkeypatch.setenv("TRKX_THREADS", "3")
    assert choose_threads(None) == 3
    assert choose_threads(1) == 1                      # the flag beats the environment


@pytest.mark.subprocess
def test_torch_gets_the_count(monkeypatch) -> None:
    import os
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRKX_THREADS")}
    assert torch_threads("1", env=env) == 1
    assert torch_threads(env={**env, "TRKX_THREADS": "3"}) == 3


@pytest.mark.parametrize(("value", "message"), [("0", "--threads must be >= 1, got 0")])
def test_bad_count_is_one_line(value: str, message: str, capsys) -> None:
    assert main(["--threads", value, "info", "no/such/event"]) == 2
    assert message in capsys.readouterr().err


def test_bad_environment_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRKX_THREADS", "two")
    assert main(["info", "no/such/event"]) == 2
    assert "TRKX_THREADS='two' is not a whole number" in capsys.readouterr().err


@pytest.mark.subprocess
def test_openmp_spin_is_short_unless_the_environment_says_otherwise() -> None:
    """GOMP_SPINCOUNT reaches the command's process (set before torch loads): threads that
    wait at a barrier sleep soon instead of spinning against busy neighbours."""
    code = ("import os; from trkx.runtime.threads import configure_threads; "
            "configure_threads(1); print(os.environ.get('GOMP_SPINCOUNT'))")
    env = {k: v for k, v in clean_env().items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}

    def spin(extra: dict[str, str]) -> str:
        return subprocess.run([sys.executable, "-c", code], env={**env, **extra},
                              capture_output=True, text=True, check=True).stdout.strip()

    from trkx.runtime.threads import SPIN_COUNT

    assert spin({}) == SPIN_COUNT
    assert spin({"GOMP_SPINCOUNT": "7"}) == "7"
    assert spin({"OMP_WAIT_POLICY": "PASSIVE"}) == "None"
