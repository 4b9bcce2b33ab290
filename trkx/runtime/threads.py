"""How many CPU threads the numerical work of a command uses.

    threads = --threads N  >  TRKX_THREADS  >  the cores this process may run on

(``os.sched_getaffinity``, so a container or ``taskset`` limit is respected). The choice goes
to torch (``torch.set_num_threads``) and, through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``
set before torch is imported, to the OpenMP pools and to every child command that
``trkx run`` starts. Distributed ranks on one node should each get cores / ranks (docs).

An idle OpenMP thread spins before it sleeps. GNU OpenMP's default spin (300,000 polls, set
by ``GOMP_SPINCOUNT``) is right on idle cores and ruinous on busy ones: beside two busy
processes a thread that spins at a barrier holds the core its descheduled partner needs, and
event 21001 took 20-70 s against 6 s alone. trkx sets ``GOMP_SPINCOUNT`` to
:data:`SPIN_COUNT` (20,000) unless the environment sets it (or ``OMP_WAIT_POLICY``): measured on
event 21001, 2 threads, 2 cores, alone 5.9-6.1 s (default 6.0, passive waiting 6.7-6.9),
beside two busy processes 10.9-11.7 s (default 20-70, passive 10.4-10.8). libgomp reads it when
it loads, so it counts in processes where trkx sets the threads before torch is imported (the
commands, the benchmarks, ``trkx run``'s steps and workers).

numba (the compiled bucket search) sizes its thread pool once, from ``NUMBA_NUM_THREADS`` when
it is imported, so that variable is set too while numba is not imported yet. Once it is,
``numba.set_num_threads(min(threads, pool size))`` bounds it instead and the variable is left
alone: numba re-reads it at every compilation and raises if it changed after the pool started.
"""

from __future__ import annotations

import os
import sys

ENV = "TRKX_THREADS"
#: GNU OpenMP's spin before an idle thread sleeps (module docstring).
SPIN_COUNT = "20000"


class ThreadsError(ValueError):
    """A thread count that is not a whole number >= 1."""


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def choose_threads(requested: int | None) -> int:
    """The thread count of the rule above; a bad TRKX_THREADS value is an error naming it."""
    if requested is not None:
        value, source = requested, "--threads"
    elif os.environ.get(ENV):
        try:
            value, source = int(os.environ[ENV]), ENV
        except ValueError:
            raise ThreadsError(f"{ENV}={os.environ[ENV]!r} is not a whole number") from None
    else:
        return available_cores()
    if value < 1:
        raise ThreadsError(f"{source} must be >= 1, got {value}")
    return value


def configure_threads(requested: int | None) -> int:
    """Apply the thread count to this process and its children; returns it."""
    threads = choose_threads(requested)
    explicit = requested is not None or os.environ.get(ENV)
    numba = sys.modules.get("numba")
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS") + (() if numba else ("NUMBA_NUM_THREADS",))
    for name in names:
        if explicit or name not in os.environ:
            os.environ[name] = str(threads)
    os.environ[ENV] = str(threads)
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    if "torch" in sys.modules:  # imported already: set the pool directly
        sys.modules["torch"].set_num_threads(threads)
    if numba is not None:  # its pool size is fixed: use at most `threads` of it
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return threads
