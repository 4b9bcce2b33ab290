"""How many CPU threads the numerical work of a command uses.

    threads = --threads N  >  TRKX_THREADS  >  the cores this process may run on

(``os.sched_getaffinity``, so a container or ``taskset`` limit is respected). The choice goes
to torch (``torch.set_num_threads``) and, through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``
set before torch is imported, to the OpenMP pools and to every child command that
``trkx run`` starts. Distributed ranks on one node should each get cores / ranks (docs).

numba (the compiled bucket search) sizes its thread pool once, from ``NUMBA_NUM_THREADS`` when
it is imported, so that variable is set too while numba is not imported yet. Once it is,
``numba.set_num_threads(min(threads, pool size))`` bounds it instead and the variable is left
alone: numba re-reads it at every compilation and raises if it changed after the pool started.
"""

from __future__ import annotations

import os
import sys

ENV = "TRKX_THREADS"


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
    if "torch" in sys.modules:  # imported already: set the pool directly
        sys.modules["torch"].set_num_threads(threads)
    if numba is not None:  # its pool size is fixed: use at most `threads` of it
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return threads
