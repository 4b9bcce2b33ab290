"""Row blocks of an inference forward shared between threads, each thread alone on its blocks.

A fused MLP (trkx.runtime.fused_mlp) runs over an event's edges block by block: per layer a
matrix product, then one compiled pass. With every operation split over all the threads, each
of them is a parallel region (about ten per block, thousands per event) that ends in a barrier:
the threads wait for each other thousands of times, the products of a 64-wide layer run at a
third of the cores' peak, and on a busy machine a thread descheduled at a barrier stalls the
others. Here the blocks themselves are shared out instead: ``T`` worker threads (T the torch
thread count) take the blocks in turn, each running every operation of its block on its own
core with one thread (torch, the BLAS and numba each set to one thread in the worker), so the
threads meet once per forward. Every block is computed by the same operations as before, so the
result does not depend on which thread ran it.

    for_blocks(rows, block_rows, work)     # work(start, stop, buffers) for every block

``work`` must write only its own rows (and read shared inputs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

_pool: ThreadPoolExecutor | None = None
_pool_threads = 0
_lock = threading.Lock()


def _executor(threads: int) -> ThreadPoolExecutor:
    """The process's worker threads (made once per thread count)."""
    global _pool, _pool_threads
    with _lock:
        if _pool is None or _pool_threads != threads:
            if _pool is not None:
                _pool.shutdown(wait=True)
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="trkx-blocks")
            _pool_threads = threads
        return _pool


def _single_threaded() -> None:
    """This thread's torch, OpenMP/BLAS and numba work on one thread (the calling one)."""
    torch.set_num_threads(1)
    try:
        import numba

        numba.set_num_threads(1)
    except ImportError:                      # numba is optional
        pass


def for_blocks(rows: int, block_rows: int, work: Callable[[int, int, int], None],
               threads: int | None = None) -> None:
    """``work(start, stop, worker)`` for every block ``[start, stop)`` of ``block_rows`` rows
    of ``rows``, the blocks shared out in turn between ``threads`` worker threads (default:
    torch's thread count; ``worker`` in ``[0, threads)`` lets ``work`` keep one scratch per
    thread). One thread, or a single block: run in this thread, in order."""
    threads = torch.get_num_threads() if threads is None else threads
    starts = list(range(0, rows, block_rows))
    if threads <= 1 or len(starts) <= 1:
        for start in starts:
            work(start, min(start + block_rows, rows), 0)
        return
    threads = min(threads, len(starts))

    # grad, inference and autocast modes are per thread: the workers take the caller's
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()
    autocast = torch.is_autocast_enabled("cpu")
    autocast_dtype = torch.get_autocast_dtype("cpu")

    def run(worker: int) -> None:
        _single_threaded()
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), \
                torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast):
            for start in starts[worker::threads]:
                work(start, min(start + block_rows, rows), worker)

    total = torch.get_num_threads()
    try:
        for future in [_executor(threads).submit(run, w) for w in range(threads)]:
            future.result()
    finally:
        torch.set_num_threads(total)         # the BLAS's count is process-wide: restore it
