"""Worker-process pools that stop at once: Ctrl-C, an error or an abandoned generator in the
parent drops the queued jobs and terminates the workers instead of waiting for them.

    with worker_pool(n, initializer, initargs, context="spawn") as pool:
        ...pool.submit / pool.map...

Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group): the parent alone
handles it, so the user sees one line, not one traceback per worker. A job that was running when
the pool is cancelled is lost; writers must therefore write atomically (``trkx.files.atomic``).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

#: Seconds a terminated worker gets to exit before it is killed.
TERMINATE_GRACE_SECONDS = 10.0


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple) -> None:
    """Pool initializer: ignore SIGINT, then run the caller's initializer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def cancel_pool(pool: ProcessPoolExecutor) -> None:
    """Drop the queued jobs and end the workers now (terminate, then kill a straggler)."""
    # read the workers first: shutdown() drops the executor's reference to them. Terminate
    # them before shutdown() queues its sentinels: an idle worker that read one first would
    # exit by itself and run its interpreter's shutdown (the second that ending it saves)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(TERMINATE_GRACE_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()


@contextmanager
def worker_pool(workers: int, initializer: Callable[..., None] | None = None,
                initargs: tuple = (), context: str | None = None, end_when_done: bool = False,
                ) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``workers`` processes (multiprocessing start method
    ``context``; None: the platform default) that :func:`cancel_pool` ends when the body
    raises (``KeyboardInterrupt`` and ``GeneratorExit`` included); a normal exit waits for
    the submitted jobs as usual, or, with ``end_when_done`` (a body that has taken every
    result), ends the idle workers at once instead of letting each shut its interpreter down
    (about a second with a pipeline's tensors and modules loaded)."""
    import multiprocessing

    mp_context: Any = multiprocessing.get_context(context) if context else None
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp_context,
                               initializer=_start_worker, initargs=(initializer, initargs))
    try:
        yield pool
    except BaseException:
        cancel_pool(pool)
        raise
    if end_when_done:
        cancel_pool(pool)
    else:
        pool.shutdown()
