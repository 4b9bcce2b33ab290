"""The speed-up of this checkout's `trkx infer` over an earlier commit, measured back to back.

Both codes run as the command a user runs (`python -m trkx --threads T infer ... --no-evaluate`,
each in a fresh process, so start-up is counted), alternately, ``--repeats`` times on the same
events, after one untimed run of each (numba compiles its kernels into each tree's cache once).
The earlier commit is checked out with `git worktree` into a temporary folder and imported from
there (``PYTHONPATH``); both use this environment's packages. Per stage the medians of
``timing.json`` (seconds per event), the command's wall time, start-up (the command's wall time
minus the events' own), events per second and peak memory, each code's figure and the ratio
old / new; and whether the tracks are the same: per event the tracks (sets of hit ids) found by
one code and not the other. ``--busy N`` runs N busy processes (a spinning Python loop each)
beside both codes during the timed runs: the shared-machine figure. ``--config`` /
``--checkpoints`` give this checkout's runs other models (a candidate set; with ``--baseline
HEAD`` the same code, so the ratio is the models').

    python benchmarks/speedup.py --baseline f4d4de9 --events ../shared/data/trackml/real_pixel_truth
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import REPO, parse, parser, write_json

STAGES = ("load", "embedding", "graph", "filter", "gnn", "tracks", "parameters", "write",
          "total")
SPIN = "while True:\n    pass\n"


def fail(message: str) -> None:
    """One line on stderr, exit status 2 (as trkx's commands)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def worktree(commit: str, folder: Path) -> Path:
    """A detached checkout of ``commit`` in ``folder`` (made once)."""
    if not (folder / "trkx").is_dir():
        done = subprocess.run(["git", "worktree", "add", "--detach", "--force", str(folder),
                               commit], cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            fail(f"speedup.py: --baseline {commit}: "
                             f"{lines[-1] if lines else 'git worktree add failed'}")
    return folder


def run_infer(tree: Path, events: Path, n_events: int | None, threads: int, out: Path,
              settings: list[str], models: list[str] | None = None) -> dict:
    """One `trkx infer` of the code in ``tree`` (``models``: its ``--config`` / ``--checkpoints``
    arguments): its timing.json and the command's seconds."""
    if out.exists():
        shutil.rmtree(out)
    command = [sys.executable, "-m", "trkx", "--threads", str(threads), "infer", "--events",
               str(events), "--out", str(out), "--no-evaluate", *(models or [])]
    if n_events:
        command += ["--n-events", str(n_events)]
    for setting in settings:
        command += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        fail(f"speedup.py: {tree}: trkx infer failed ({done.returncode}): "
                         f"{done.stderr.strip().splitlines()[-1] if done.stderr else ''}")
    timing = json.loads((out / "timing.json").read_text())
    timing["command_seconds"] = seconds
    return timing


def track_sets(out: Path) -> dict[str, set[frozenset[int]]]:
    """Per tracks file of ``out``: its tracks of >= 2 hits as sets of hit ids."""
    import pandas as pd

    tracks = {}
    for path in sorted(out.glob("*-tracks.csv*")):
        frame = pd.read_csv(path)
        groups = frame[frame.track_id >= 0].groupby("track_id").hit_id
        tracks[path.name] = {frozenset(hits.tolist()) for _, hits in groups if len(hits) >= 2}
    return tracks


def compare_tracks(old: Path, new: Path) -> dict:
    """Per event: tracks of each code, and those only one of them found."""
    before, after = track_sets(old), track_sets(new)
    result = {}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, set()), after.get(name, set())
        result[name] = {"tracks_old": len(a), "tracks_new": len(b),
                        "only_old": len(a - b), "only_new": len(b - a)}
    return result


def summary(runs: list[dict]) -> dict:
    """Medians over the timed runs of one code."""
    figures = {stage: statistics.median(r["mean_seconds"].get(stage, 0.0) for r in runs)
               for stage in STAGES}
    figures["command"] = statistics.median(r["command_seconds"] for r in runs)
    figures["start_up"] = statistics.median(r["command_seconds"] - r["wall_seconds"]
                                            for r in runs)
    figures["events_per_second"] = statistics.median(r["events_per_second"] for r in runs)
    figures["peak_memory_gb"] = max(r["peak_memory_gb"] for r in runs)
    return figures


def main() -> None:
    p = parser(__doc__, events="folder of TrackML events (default: the real event 21001)",
               n_events=0)
    p.add_argument("--baseline", default="f4d4de9", help="the earlier commit (default f4d4de9)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each code")
    p.add_argument("--busy", type=int, default=0, help="busy processes beside the timed runs")
    p.add_argument("--set", dest="settings", action="append", default=[],
                   metavar="KEY=VALUE", help="pipeline override for this checkout's runs")
    p.add_argument("--baseline-set", dest="baseline_settings", action="append", default=[],
                   metavar="KEY=VALUE", help="pipeline override for the earlier commit's runs")
    p.add_argument("--config", type=Path, help="this checkout's runs: the pipeline YAML of "
                   "other models (with --checkpoints)")
    p.add_argument("--checkpoints", type=Path, help="this checkout's runs: their models")
    args = parse(p)
    if (args.config is None) != (args.checkpoints is None):
        fail("speedup.py: --config and --checkpoints go together")
    from harness import DATA

    events = (args.events or DATA / "real_pixel_truth").resolve()
    if not events.is_dir():
        fail(f"speedup.py: {events}: no such folder of events")
    if args.repeats < 1:
        fail("speedup.py: --repeats must be >= 1")
    work = Path(tempfile.mkdtemp(prefix="trkx-speedup-"))
    try:
        measure(args, events, work)
    finally:                     # also after a failed run: no worktree or folder left behind
        subprocess.run(["git", "worktree", "remove", "--force", str(work / "baseline")],
                       cwd=REPO, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def measure(args, events: Path, work: Path) -> None:
    """The runs of both codes in ``work`` (module docstring), printed and written."""
    old_tree = worktree(args.baseline, work / "baseline")
    trees = {"old": (old_tree, args.baseline_settings), "new": (REPO, args.settings)}
    models = {"old": None, "new": None if args.config is None else [
        "--config", str(args.config.resolve()), "--checkpoints", str(args.checkpoints.resolve())]}
    n = args.n_events or None
    for name, (tree, settings) in trees.items():               # untimed: numba's caches
        run_infer(tree, events, n, args.threads, work / f"warm_{name}", settings, models[name])
    busy = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    try:
        for repeat in range(args.repeats):
            for name, (tree, settings) in trees.items():
                runs[name].append(run_infer(tree, events, n, args.threads,
                                            work / f"{name}_{repeat}", settings, models[name]))
                print(f"{name} run {repeat + 1}: total "
                      f"{runs[name][-1]['mean_seconds']['total']:.2f} s per event, command "
                      f"{runs[name][-1]['command_seconds']:.2f} s", flush=True)
    finally:
        for process in busy:
            process.kill()
    old, new = summary(runs["old"]), summary(runs["new"])
    # old / new: how many times faster the new code is (events per second: new / old)
    ratio = {key: (old[key] / new[key] if new[key] else None) for key in old}
    ratio["events_per_second"] = new["events_per_second"] / old["events_per_second"]
    tracks = compare_tracks(work / "old_0", work / "new_0")
    print(f"{'figure':<18} {'old':>9} {'new':>9} {'old/new':>8}")
    for key in old:
        print(f"{key:<18} {old[key]:>9.3f} {new[key]:>9.3f} "
              f"{ratio[key] if ratio[key] is not None else float('nan'):>8.2f}")
    for event, counts in tracks.items():
        print(f"{event}: tracks {counts['tracks_old']} / {counts['tracks_new']}, only the old "
              f"code's {counts['only_old']}, only the new code's {counts['only_new']}")
    write_json(args.json, {"baseline": args.baseline, "events": str(events),
                           "n_events": n, "threads": args.threads, "busy": args.busy,
                           "settings": args.settings,
                           "models": models["new"],
                           "baseline_settings": args.baseline_settings,
                           "repeats": args.repeats, "old": old, "new": new, "ratio": ratio,
                           "tracks": tracks})

if __name__ == "__main__":
    from harness import start

    start()
    main()
