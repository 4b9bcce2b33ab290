"""The ``trkx`` command line: one entry point, one module per subcommand.

Every module of this package that defines ``register(subparsers)`` is a subcommand: it adds its
parser and sets ``func(args) -> int`` as the handler. Modules import heavy dependencies (torch,
Lightning, FAISS) inside their handlers, so ``trkx --help`` and ``trkx info`` stay fast. Errors in
user input (bad files, bad configs, bad checkpoints) print one clear line and exit with status
2; ``--debug`` (or ``TRKX_DEBUG=1``) shows the traceback instead. Ctrl-C prints one line and exits
with 130, also for a command started in the background by a script (``nohup trkx run ... &``
leaves SIGINT ignored; the entry restores it, so ``kill -INT`` stops a long training cleanly, its
state saved); a closed output pipe (``trkx run --dry-run | head``) ends the command quietly.

The commands of :data:`QUICK_EXIT` end their process as soon as their handler returns (its
files written and closed, standard output and error flushed): the interpreter's own shutdown
(every module's objects, torch's and numba's thread pools, the event's gigabytes of tensors
freed one by one) took about a second after ``trkx infer`` of a pile-up-200 event, longer than
loading its models.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence

from trkx.config import ConfigError
from trkx.files.errors import TrackMLFormatError
from trkx.pipeline.runner import StepFailed
from trkx.runtime import allocator
from trkx.runtime.threads import ThreadsError, configure_threads
from trkx.training.fit import StageFailed

#: Exceptions that mean a user mistake: one line, exit status 2.
USER_ERRORS = (TrackMLFormatError, ConfigError, FileNotFoundError, NotADirectoryError,
               StepFailed, StageFailed, allocator.AllocatorError)
#: Options that count things (``dest: flag``): below 1 is a user mistake named by its flag,
#: checked for every command that has one before its handler starts.
COUNT_OPTIONS = {"n_events": "--n-events"}
INTERRUPTED = 130
#: The order of ``trkx --help``: what a new user runs first, first.
HELP_ORDER = ("infer", "run", "train", "simulate", "evaluate", "score", "info", "tune-tracks",
              "build-tracks",
              "export", "partition", "demo")
BROKEN_PIPE = 141
#: Commands whose process ends when the handler returns, without the interpreter's shutdown
#: (module docstring): each writes its files through closed handles (trkx.tracks.files) and
#: keeps no state that an exit handler would have to save. Training commands are not among
#: them (Lightning's loggers and torch.distributed close at exit).
QUICK_EXIT = frozenset({"infer", "evaluate", "build-tracks", "tune-tracks", "score", "info",
                        "demo", "export"})


def command_modules() -> list:
    """The subcommand modules of this package, in name order."""
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):          # helpers (_help), imported by handlers
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            modules.append(module)
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trkx",
        description="GNN track reconstruction for TrackML-format events (Exa.TrkX recipe).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of errors (also: TRKX_DEBUG=1)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="CPU threads for the numerical work (also: TRKX_THREADS; "
                             "default: every core this process may use)")
    for module in command_modules():
        module.register(subparsers)
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    subparsers._choices_actions.sort(key=lambda action: rank.get(action.dest, len(rank)))
    _add_debug(parser)
    return parser


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the command too (``trkx train gnn ... --debug``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if "--debug" not in sub._option_string_actions:
                    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                     help="show the traceback of errors")
                _add_debug(sub)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split("\n")).strip() or type(exc).__name__


def check_counts(args: argparse.Namespace) -> None:
    """``--n-events 0`` (or negative) ends with one line naming the option."""
    for dest, flag in COUNT_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be >= 1, got {value}")


def listen_to_interrupts() -> None:
    """Restore Python's SIGINT handler (KeyboardInterrupt) when the process inherited an ignored
    SIGINT, as every background job of a non-interactive shell does."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Called without ``argv`` (the ``trkx`` script, ``python -m trkx``), it is
    the process entry and first puts the memory allocator in place
    (trkx/runtime/allocator.py), which
    may re-execute the process once; with ``argv`` (tests, other code) the process is left as
    it is."""
    args = build_parser().parse_args(argv)
    code = _run(args, argv)
    if argv is None and args.command in QUICK_EXIT:
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """End this process with ``code`` now: its standard streams flushed, nothing else run (no
    exit handlers, no objects freed; the kernel releases the memory at once)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):    # a reader gone away or a stream already closed
            pass
    os._exit(code)


def _run(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """:func:`main`'s handler call with its error handling (module docstring)."""
    debug = bool(getattr(args, "debug", False)) or os.environ.get("TRKX_DEBUG") == "1"
    try:
        if argv is None:
            listen_to_interrupts()
            allocator.setup()
        configure_threads(args.threads)
        check_counts(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"trkx {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the flush at exit, no traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except (*USER_ERRORS, ThreadsError) as exc:
        if debug:
            raise
        print(f"trkx {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
