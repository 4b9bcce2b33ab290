"""The one harness of the benchmarks: common arguments, timing, the machine, one JSON shape.

A script calls :func:`start` first (``if __name__ == "__main__"``, before torch loads), builds
its arguments with :func:`parser` and :func:`parse`, times with :func:`timed` (or
:func:`best_of`), draws with :func:`pyplot` and :func:`save_figure` and ends with
:func:`write_json`, which keeps the script's figures at the top level (the keys README, the
model card and ``trkx.packaging.package`` read) and adds one ``run`` object: the command line, the
commit and whether the tree had uncommitted changes, the date, the wall seconds since
:func:`start` and the machine (:func:`machine`): any figure traces back to what made it.
Memory is read from /proc (Linux): :func:`rss_kib`, :func:`peak_rss_kib`, :func:`reset_peak_rss`.
Only the standard library is imported at the top; torch is read from ``sys.modules`` when
loaded, and imported by the machine's rates (:func:`matmul_rates`, :func:`memory_bandwidth`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:            # `tests.reference` and `trkx` of this checkout
    sys.path.insert(1, str(REPO))
#: The real TrackML files: $TRKX_DATA, else ../shared/data/trackml beside the checkout.
DATA = Path(os.environ.get("TRKX_DATA", REPO.parent / "shared" / "data" / "trackml"))
_STARTED = time.perf_counter()


def start() -> None:
    """The process entry of a benchmark: trkx's caching allocator (re-executes once under it),
    as every ``trkx`` command does. Call it before torch is imported."""
    global _STARTED
    from trkx.runtime.allocator import setup
    setup()
    _STARTED = time.perf_counter()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:      # one line and exit 2, as trkx's commands
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser(doc: str | None, *, events: str | None = None, models: bool = False,
           n_events: int | None = None, threads: bool = True, data: bool = False,
           quick: str | None = None, seed: bool = False, plot: bool = False,
           plots: bool = False, require_json: bool = False) -> argparse.ArgumentParser:
    """An argument parser with the common options: ``--json PATH`` (``require_json``: required)
    and ``--threads N`` (``threads`` False: the script defines its own), and where asked:
    ``--events DIR`` (``events``: its help), ``--n-events N`` (that default), ``--config`` and
    ``--checkpoints`` (``models``), ``--data DIR`` (:data:`DATA`), ``--quick`` (its help),
    ``--seed``, ``--plot PNG`` (default: beside ``--json``), ``--plots DIR``. Errors: one line,
    exit status 2."""
    text = (doc or "").strip()
    p = _Parser(description=text.split("\n\n")[0],
                epilog="\n\n".join(text.split("\n\n")[1:]) or None,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", type=Path, required=require_json, help="write the figures here "
                   "(with the command, commit and machine that produced them)")
    if threads:
        p.add_argument("--threads", type=int, default=None,
                       help="threads of torch, OpenMP and numba (default: TRKX_THREADS, "
                            "else every core this process may use)")
    if events is not None:
        p.add_argument("--events", type=Path, help=events)
    if n_events is not None:
        p.add_argument("--n-events", type=int, default=n_events,
                       help=f"events used (default {n_events})")
    if models:
        p.add_argument("--config", type=Path, help="pipeline YAML of the models "
                       "(default: the shipped hits-only pile-up-200 models)")
        p.add_argument("--checkpoints", type=Path, help="its checkpoint folder")
    if data:
        p.add_argument("--data", type=Path, default=DATA, metavar="DIR", help="the TrackML "
                       "data folder (default: $TRKX_DATA, else ../shared/data/trackml)")
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=quick)
    if seed:
        p.add_argument("--seed", type=int, default=0)
    if plot:
        p.add_argument("--plot", type=Path, help="PNG of the figures (default: beside --json)")
    if plots:
        p.add_argument("--plots", type=Path, metavar="DIR", help="folder of the plots")
    return p


def parse(p: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse, then apply ``--threads`` (trkx's rule: --threads > TRKX_THREADS > cores) and
    place ``--plot`` beside ``--json`` when not given."""
    args = p.parse_args(argv)
    from trkx.runtime.threads import configure_threads
    if hasattr(args, "threads"):
        args.threads = configure_threads(args.threads)
    if getattr(args, "plot", False) is None and args.json is not None:
        args.plot = args.json.with_suffix(".png")
    return args


def best_of(fn: Callable[[], Any], repeats: int = 1, warmup: bool = False) -> tuple[Any, float]:
    """``(result, best wall seconds)`` of ``repeats`` calls of ``fn`` (after one more call, not
    timed, with ``warmup``)."""
    if warmup:
        fn()
    best, result = float("inf"), None
    for _ in range(repeats):
        begin = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - begin)
    return result, best


def pyplot():
    """matplotlib's pyplot on the file backend (Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: Path, dpi: int = 120) -> None:
    """Lay out, write (its folder made) and close ``fig``."""
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    sys.modules["matplotlib.pyplot"].close(fig)


@contextlib.contextmanager
def timed(seconds: dict[str, list[float]], stage: str) -> Iterator[None]:
    """Append the wall seconds of the ``with`` block to ``seconds[stage]``."""
    begin = time.perf_counter()
    try:
        yield
    finally:
        seconds.setdefault(stage, []).append(time.perf_counter() - begin)


def medians(seconds: dict[str, list[float]], skip: int = 0) -> dict[str, float]:
    """Median seconds of each stage, the first ``skip`` runs (warm-up) left out."""
    return {stage: statistics.median(times[skip:] or times) for stage, times in seconds.items()}


def matmul_rates() -> dict[str, float]:
    """FLOP/s at the torch thread count in force of a square fp32 GEMM (2048^3), a tall-skinny
    fp32 layer ([65536, 128] x [128, 128], the stages' hidden layers) and a square bf16 GEMM
    (best of 3, 1 for bf16, after a warm-up call); the ceilings a stage's roofline uses."""
    import torch

    def best_seconds(fn, repeats: int = 3) -> float:
        with torch.inference_mode():
            return best_of(fn, repeats, warmup=True)[1]

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2048, 2048, generator=generator)
    b = torch.randn(2048, 2048, generator=generator)
    tall = torch.randn(65536, 128, generator=generator)
    weight = torch.randn(128, 128, generator=generator)
    a16, b16 = a.bfloat16(), b.bfloat16()
    return {"gemm_fp32": 2 * 2048**3 / best_seconds(lambda: a @ b),
            "tall_skinny_fp32": 2 * 65536 * 128 * 128 / best_seconds(lambda: tall @ weight),
            "gemm_bf16": 2 * 2048**3 / best_seconds(lambda: a16 @ b16, repeats=1)}


def memory_bandwidth() -> float:
    """B/s of a triad ``c = a + 2 b`` over 3 x 128 MB float32 arrays (12 bytes per element:
    two read, one written), best of 3 after a warm-up, at the thread count in force."""
    import torch

    n = 32 * 2**20
    a, b, c = torch.ones(n), torch.ones(n), torch.empty(n)
    with torch.inference_mode():
        return 12 * n / best_of(lambda: torch.add(a, b, alpha=2.0, out=c), 3, warmup=True)[1]


def machine_rates() -> dict[str, float]:
    """The machine's roofline: :func:`matmul_rates` and ``memory_bandwidth`` (B/s)."""
    return {**matmul_rates(), "memory_bandwidth": memory_bandwidth()}


def _cpu() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPU, cores, threads, load, memory, GPU, versions."""
    info: dict[str, Any] = {
        "cpu": _cpu(), "cores": os.cpu_count(), "threads": os.environ.get("TRKX_THREADS"),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg")
        else None, "python": platform.python_version(), "platform": platform.platform()}
    with contextlib.suppress(OSError, AttributeError, ValueError):
        info["memory_gb"] = round(int(re.search(r"MemTotal:\s+(\d+)", Path(
            "/proc/meminfo").read_text()).group(1)) / 2**20, 1)
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch"] = torch.__version__
        info["gpu"] = (torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    with contextlib.suppress(Exception):
        from trkx.runtime.allocator import active
        info["allocator"] = active()
    return info


def available_bytes() -> int | None:
    """Memory the kernel can give a process now (``MemAvailable``), or None where unknown."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        return int(re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
                   .group(1)) * 1024
    return None


def _git(*args: str) -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10)
        if done.returncode == 0:
            return done.stdout.strip()
    return None


def provenance() -> dict[str, Any]:
    """The ``run`` object of every benchmark JSON."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(REPO):          # as the README writes it
        script = script.relative_to(REPO)
    return {"command": " ".join(["python", str(script), *sys.argv[1:]]),
            "commit": _git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None
            else None, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - _STARTED, 1), "machine": machine()}


def _plain(value: Any) -> Any:
    """JSON for numpy and torch scalars and arrays (``tolist``), paths and the rest (str)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def write_json(path: Path | None, figures: dict[str, Any]) -> None:
    """Write ``figures`` with the ``run`` object (atomically; nothing when ``path`` is None)."""
    if path is None:
        return
    from trkx.files.atomic import atomic_write
    text = json.dumps({**figures, "run": provenance()}, indent=1, default=_plain)
    atomic_write(path, lambda tmp: tmp.write_text(text + "\n"))
    print(f"wrote {path}")


def _status_kib(key: str) -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def rss_kib() -> int:
    """Resident memory of this process now (VmRSS)."""
    return _status_kib("VmRSS")


def peak_rss_kib() -> int:
    """Its high-water mark (VmHWM) since start or :func:`reset_peak_rss`."""
    return _status_kib("VmHWM")


def reset_peak_rss() -> None:
    """Reset the high-water mark, so a peak can be measured over one stretch of work."""
    Path("/proc/self/clear_refs").write_text("5")


def release_free_heap() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``; nothing under a preloaded
    allocator), so that the resident size before a step counts live data."""
    import ctypes
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def free_port() -> int:
    """A free TCP port on this host (rendezvous of distributed runs)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_pipeline(args, overrides: tuple[str, ...] = ()):
    """The TrainedPipeline of ``--config``/``--checkpoints``; neither: the shipped hits-only
    set (it reads every hit file; trkx.pipeline.reconstruct.Reconstructor chooses per event)."""
    from trkx.pipeline.inference import TrainedPipeline

    config, checkpoints = args.config, args.checkpoints
    if config is None and checkpoints is None:
        from trkx.models import shipped_models

        shipped = shipped_models()
        config, checkpoints = shipped.config, shipped.checkpoints
    return TrainedPipeline.load(config, checkpoints, list(overrides))
