"""Simulated vs real events: the distributions the models see, side by side.

    python benchmarks/sim_vs_real.py --json out.json --plots DIR [--quick]
        [--vertex-sigma-z 50] [--events 8] [--seed 0]
        [--checkpoints DIR --config PIPELINE.yaml]

Two real events of the later release of the TrackML data (luminous region sigma_z ~ 50 mm),
each beside simulated twins (``--events`` pile-up-200 events of the built-in generator at
``--vertex-sigma-z``, shared by both comparisons):

* ``event21001``: the full real event 21001 in its pixel projection (only its pixel hits with
  recovered truth carry truth; volumes 7, 8, 9) beside whole simulated events projected the same
  way (their pixel hits); hits per layer and cluster shapes use every hit of both;
* ``sample``: the real sample event (a ~5% subsample of a real event: particles drawn at random
  with all their hits, plus noise) beside each simulated event cut down the same way
  (:func:`event_distributions.subsample`: the sample's particle count and noise share; its
  noise share is therefore not compared).

Every distribution of :mod:`event_distributions` (hits per layer, noise share, hits per
particle and per layer crossed, displaced share and radius, primary-vertex z, pT,
eta, the edge geometry features on true and on signal edges, cells per cluster and charge per
volume) is histogrammed on fixed bins and compared by its total variation distance (TVD);
``tvd_floor`` is the median TVD that drawing the real sample's size from the simulated
histogram gives (finite statistics alone; a lower bound), ``tvd_spread`` the median TVD of
one simulated twin from the others (event-to-event variation: which vertices, which particle
clusters; the yardstick for a single real event). ``layer_count_max_rel_diff`` is the
largest ``|N_sim - N_real| / N_real`` over the (volume, layer) hit counts of event 21001
(``N_sim``: mean over the simulated events).

With ``--checkpoints DIR --config PIPELINE.yaml`` the trained models run on event 21001 and on
each twin (pixel projection: truth on pixel hits only; signal = pT > 1 GeV, >= 3 pixel hits;
tracks projected onto the truth hits), and on the sample event and its twins; the JSON gets
per-stage signal-edge efficiency and track efficiency of both and their absolute gaps
(:mod:`sim_vs_real_models`). ``--quick``: two simulated events, under a minute on 2 cores
without models.

``cell_shape_tvd`` is the per-volume table of the cluster-shape hit features
(:data:`event_distributions.SHAPE_FEATURES`: extents, direction angles and cell count, the
cluster-shape inputs of the models): ``{comparison: {volume: {feature: TVD}}}`` between a real
event and all hits of the same kind in the whole simulated events (a hit's shape does not depend
on the subsampling), with ``cell_shape_tvd_floor`` (finite real statistics) and
``cell_shape_entries`` beside it. The comparisons:

* ``sample/particle_hits``, ``event21001/particle_hits``: the hits of particles (truth
  ``particle_id != 0``; noise left out on both sides): every volume of the sample event, the
  pixel volumes 7, 8, 9 of event 21001 (only they carry truth);
* ``sample/all_hits``, ``event21001/all_hits``: every hit with cells, noise included on both
  sides, all nine volumes.

``--shapes-only`` computes just this table (seconds):

    python benchmarks/sim_vs_real.py --shapes-only --quick --json shapes.json
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from event_distributions import (
    PIXEL_VOLUMES,
    SHAPE_BINS,
    SHAPE_FEATURES,
    EventView,
    compare,
    event_samples,
    event_view,
    histogram,
    pool,
    shape_samples,
    subsample,
    tvd,
    tvd_floor,
)

from trkx.data.detector import load_detector
from trkx.data.particle_id import decode_particle_id
from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.runner import event_rng
from trkx.data.truth import layer_key

REPO = Path(__file__).resolve().parent.parent
REAL_EVENT = "real_pixel_truth/event000021001"
SAMPLE_EVENT = "sample_event/event000000001"
FIRST_SIM_ID = 900_000          # ids of the simulated twins (seeded by (seed, id))
PILEUP = 200.0


def default_data_dir() -> Path:
    env = os.environ.get("TRKX_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data" / "trackml"


def read(prefix: Path, part: str) -> pd.DataFrame:
    return pd.read_csv(f"{prefix}-{part}.csv.gz")


def vertex_sigma_z(tables: list[pd.DataFrame]) -> dict[str, float]:
    """The luminous region of particle tables (one per event): std of the primary-vertex z
    (one entry per vertex of each event, the mean vz of its prompt particles) and of the prompt
    particles' vz."""
    vertex_z, particle_z = [], []
    for particles in tables:
        vr = np.hypot(particles["vx"], particles["vy"]).to_numpy()
        prompt = particles[vr < 1.0]
        vertex = decode_particle_id(prompt["particle_id"].to_numpy())["vertex_id"]
        vertex_z.append(prompt["vz"].groupby(vertex).mean().to_numpy())
        particle_z.append(prompt["vz"].to_numpy())
    z = np.concatenate(vertex_z)
    return {"per_vertex_mm": float(np.std(z, ddof=1)), "n_vertices": int(z.size),
            "per_prompt_particle_mm": float(np.std(np.concatenate(particle_z), ddof=1))}


def real_views(data: Path) -> dict[str, tuple[EventView, dict]]:
    """The two real events as views, with facts about them."""
    real = data / REAL_EVENT
    particles = read(real, "particles")
    hits = read(real, "hits")
    event21001 = event_view(hits, read(real, "cells"), particles, read(real, "truth-pixel"),
                            PIXEL_VOLUMES)
    sample = data / SAMPLE_EVENT
    sample_particles = read(sample, "particles")
    sample_truth = read(sample, "truth")
    sample_view = event_view(read(sample, "hits"), read(sample, "cells"), sample_particles,
                             sample_truth)
    return {
        "event21001": (event21001, {"hits": len(hits), "particles": len(particles),
                                    "truth_hits": int(event21001.truth_hit.sum()),
                                    "vertex_sigma_z": vertex_sigma_z([particles])}),
        "sample": (sample_view, {"hits": len(sample_view.hits),
                                 "particles": len(sample_particles),
                                 "noise_share": float((sample_truth["particle_id"] == 0).mean()),
                                 "vertex_sigma_z": vertex_sigma_z([sample_particles])}),
    }


def simulate(n_events: int, seed: int, sigma_z: float) -> list[dict[str, pd.DataFrame]]:
    """``n_events`` pile-up-200 events, event ``FIRST_SIM_ID + i`` drawn as ``trkx simulate
    --seed SEED --vertex-sigma-z SIGMA_Z`` draws it."""
    events = []
    for i in range(n_events):
        rng = event_rng(seed, FIRST_SIM_ID + i)
        events.append(simulate_event(generate_particles(PILEUP, rng, sigma_z), rng))
    return events


def twin_views(events: list[dict[str, pd.DataFrame]], sample_facts: dict, seed: int
               ) -> dict[str, list[EventView]]:
    """Pixel-projected twins of event 21001 and subsampled twins of the sample event."""
    pixel, sampled = [], []
    for i, tables in enumerate(events):
        full = event_view(tables["hits"], tables["cells"], tables["particles"],
                          tables["truth"])
        pixel.append(event_view(tables["hits"], tables["cells"], tables["particles"],
                                tables["truth"], PIXEL_VOLUMES))
        rng = np.random.default_rng([seed, FIRST_SIM_ID + i, 1])
        sampled.append(subsample(full, sample_facts["particles"], sample_facts["noise_share"],
                                 rng))
    return {"event21001": pixel, "sample": sampled}


def layer_counts(real: EventView, sims: list[EventView]) -> dict:
    """Hits per (volume, layer): real counts, mean simulated counts, relative differences."""
    def counts(view: EventView) -> pd.Series:
        return pd.Series(layer_key(view.hits["volume_id"].to_numpy(),
                                   view.hits["layer_id"].to_numpy())).value_counts()

    real_n = counts(real)
    sim_n = pd.concat([counts(v) for v in sims], axis=1).fillna(0).mean(axis=1)
    table = pd.DataFrame({"real": real_n, "sim": sim_n}).fillna(0).sort_index()
    rel = (table["sim"] - table["real"]) / table["real"].clip(lower=1)
    pixel = table.index // 1000 <= max(PIXEL_VOLUMES)
    worst = rel.abs().idxmax()
    return {"layer_count_max_rel_diff": float(rel.abs().max()),
            "layer_count_max_rel_diff_layer": int(worst),
            "layer_count_max_rel_diff_pixel": float(rel[pixel].abs().max()),
            "total_hits_rel_diff": float(table["sim"].sum() / table["real"].sum() - 1.0),
            "layers": {str(k): {"real": float(r["real"]), "sim": float(r["sim"]),
                                "rel_diff": float(rel[k])} for k, r in table.iterrows()}}


def distributions(name: str, real: EventView, sims: list[EventView], rng: np.random.Generator,
                  skip: tuple[str, ...] = ()) -> dict[str, dict]:
    """Histograms, TVD, TVD floor, simulated spread and means of every distribution of
    ``real`` vs the pooled ``sims``.

    ``tvd_spread`` is the median over the simulated events of the TVD between one of them and
    the pool of the others: how far one event lies from the simulation's own average (its
    vertex configuration, its particle clusters). A real event that matched the simulation
    would lie about this far; None with one simulated event.
    """
    real_s = event_samples(real)
    per_event = [event_samples(v) for v in sims]
    sim_s = pool(per_event)
    out = {}
    for dist in real_s:
        if dist in skip or dist not in sim_s or real_s[dist].size == 0:
            continue
        a, b, categories = compare(dist, real_s[dist], sim_s[dist])
        spread = None
        if len(per_event) > 1:
            singles = []
            for i, one in enumerate(per_event):
                rest = np.concatenate([e[dist] for j, e in enumerate(per_event) if j != i])
                if one[dist].size and rest.size:
                    h_one, h_rest, _ = compare(dist, one[dist], rest, categories)
                    singles.append(tvd(h_one, h_rest))
            spread = float(np.median(singles)) if singles else None
        out[f"{name}/{dist}"] = {
            "tvd": tvd(a, b), "tvd_floor": tvd_floor(b, int(a.sum()), rng),
            "tvd_spread": spread,
            "mean": {"real": float(real_s[dist].mean()), "sim": float(sim_s[dist].mean())},
            "entries": {"real": int(a.sum()), "sim": int(b.sum())},
            "hist": {"real": a.tolist(), "sim": b.tolist()},
            "categories": None if categories is None else categories.tolist()}
    return out


def shape_tables(reals: dict[str, tuple[EventView, dict]],
                 events: list[dict[str, pd.DataFrame]], rng: np.random.Generator) -> dict:
    """The per-volume cluster-shape TVD table (see the module docstring): ``cell_shape_tvd``,
    ``cell_shape_tvd_floor``, ``cell_shape_entries`` and ``cell_shape_mean``."""
    detector = load_detector()
    sim_particle, sim_all = [], []
    for tables in events:
        pid = (tables["truth"].set_index("hit_id")["particle_id"]
               .reindex(tables["hits"]["hit_id"].to_numpy()).to_numpy())
        sim_particle.append(shape_samples(tables["hits"], tables["cells"], detector, pid != 0))
        sim_all.append(shape_samples(tables["hits"], tables["cells"], detector))
    out: dict[str, dict] = {"cell_shape_tvd": {}, "cell_shape_tvd_floor": {},
                            "cell_shape_entries": {}, "cell_shape_mean": {}}
    for name, (view, _) in reals.items():
        particle = view.truth_hit & (view.particle_id != 0)
        for selection, real, sims in (
                ("particle_hits", shape_samples(view.hits, view.cells, detector, particle),
                 sim_particle),
                ("all_hits", shape_samples(view.hits, view.cells, detector), sim_all)):
            key = f"{name}/{selection}"
            for table in out.values():
                table[key] = {}
            for volume, real_values in real.items():
                sim_values = {f: np.concatenate([s[volume][f] for s in sims if volume in s])
                              for f in SHAPE_FEATURES}
                if sim_values["cell_count"].size == 0:
                    continue
                row, floor, mean = {}, {}, {}
                for feature in SHAPE_FEATURES:
                    a = histogram(real_values[feature], SHAPE_BINS[feature])
                    b = histogram(sim_values[feature], SHAPE_BINS[feature])
                    row[feature] = tvd(a, b)
                    floor[feature] = tvd_floor(b, int(a.sum()), rng, draws=30)
                    mean[feature] = {"real": float(real_values[feature].mean()),
                                     "sim": float(sim_values[feature].mean())}
                out["cell_shape_tvd"][key][str(volume)] = row
                out["cell_shape_tvd_floor"][key][str(volume)] = floor
                out["cell_shape_mean"][key][str(volume)] = mean
                out["cell_shape_entries"][key][str(volume)] = {
                    "real": int(real_values["cell_count"].size),
                    "sim": int(sim_values["cell_count"].size)}
    return out


def print_shape_tables(out: dict) -> None:
    """The cell-shape TVD tables, one row per (comparison, volume)."""
    print(f"{'cell-shape TVD':28s} " + " ".join(f"{f[:9]:>9s}" for f in SHAPE_FEATURES)
          + "   n real   floor(count)")
    for key, table in out["cell_shape_tvd"].items():
        for volume, row in table.items():
            n = out["cell_shape_entries"][key][volume]["real"]
            floor = out["cell_shape_tvd_floor"][key][volume]["cell_count"]
            print(f"{key + ' vol ' + volume:28s} "
                  + " ".join(f"{row[f]:9.3f}" for f in SHAPE_FEATURES)
                  + f" {n:8d} {floor:7.3f}")


def plot(key: str, result: dict, path: Path) -> None:
    """Real vs simulated shares of one distribution on its fixed bins."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from event_distributions import bins_for

    real = np.asarray(result["hist"]["real"]) / sum(result["hist"]["real"])
    sim = np.asarray(result["hist"]["sim"]) / sum(result["hist"]["sim"])
    fig, ax = plt.subplots(figsize=(7, 4))
    edges = bins_for(key.split("/", 1)[1])
    if edges is None:
        x = np.arange(len(real))
        ax.bar(x - 0.2, real, 0.4, label="real")
        ax.bar(x + 0.2, sim, 0.4, label="simulated")
        ax.set_xticks(x, [str(int(c)) for c in result["categories"]], rotation=90, fontsize=6)
    else:
        ax.stairs(real, edges, label="real", linewidth=1.5)
        ax.stairs(sim, edges, label="simulated", linewidth=1.5)
    ax.set_xlabel(key)
    ax.set_ylabel("share")
    ax.set_title(f"{key}: TVD {result['tvd']:.3f} (floor {result['tvd_floor']:.3f})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fail(message: str) -> None:
    """One-line error, exit status 2."""
    print(f"sim_vs_real.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # one line, not usage + message
        fail(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, metavar="FILE")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR")
    parser.add_argument("--quick", action="store_true",
                        help="two simulated events (under a minute without models)")
    parser.add_argument("--events", type=int, default=8, metavar="N",
                        help="simulated pile-up-200 twins (default 8; 1 with --quick)")
    parser.add_argument("--vertex-sigma-z", type=float, default=50.0, metavar="MM",
                        help="luminous region of the twins (default 50, the real events' "
                             "release)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shapes-only", action="store_true",
                        help="only the per-volume cluster-shape TVD table (seconds)")
    parser.add_argument("--data", type=Path, default=None, metavar="DIR",
                        help="TrackML data folder (default $TRKX_DATA or ../shared/data/trackml)")
    parser.add_argument("--checkpoints", type=Path, default=None, metavar="DIR")
    parser.add_argument("--config", type=Path, default=None, metavar="PIPELINE.yaml")
    args = parser.parse_args(argv)
    if args.quick:
        args.events = 2
    if args.events < 1:
        fail(f"--events must be >= 1, got {args.events}")
    if not (np.isfinite(args.vertex_sigma_z) and args.vertex_sigma_z > 0):
        fail(f"--vertex-sigma-z must be a positive length in mm, got {args.vertex_sigma_z}")
    if (args.checkpoints is None) != (args.config is None):
        fail("--checkpoints and --config go together")
    args.data = args.data or default_data_dir()
    for part in (REAL_EVENT, SAMPLE_EVENT):
        if not (args.data / f"{part}-hits.csv.gz").is_file():
            fail(f"{args.data / part}-hits.csv.gz: no such file (--data or $TRKX_DATA must "
                 "name the TrackML data folder)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    reals = real_views(args.data)
    events = simulate(args.events, args.seed, args.vertex_sigma_z)
    shapes = shape_tables(reals, events, np.random.default_rng([args.seed, 3]))
    if args.shapes_only:
        out = {**shapes, "real": {name: facts for name, (_, facts) in reals.items()},
               "simulated": {"events": args.events, "pileup": PILEUP, "seed": args.seed,
                             "vertex_sigma_z": args.vertex_sigma_z,
                             "first_event_id": FIRST_SIM_ID},
               "seconds": time.perf_counter() - start}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
        print_shape_tables(out)
        return 0
    twins = twin_views(events, reals["sample"][1], args.seed)
    rng = np.random.default_rng([args.seed, 2])
    results: dict[str, dict] = {}
    results.update(distributions("event21001", reals["event21001"][0], twins["event21001"],
                                 rng))
    results.update(distributions("sample", reals["sample"][0], twins["sample"], rng,
                                 skip=("noise_share",)))
    layers = layer_counts(reals["event21001"][0],
                          [event_view(e["hits"], None, e["particles"], e["truth"])
                           for e in events])
    tvds = {k: r["tvd"] for k, r in results.items()}
    worst = max(tvds, key=tvds.get)
    out = {
        "tvd": tvds,
        "tvd_floor": {k: r["tvd_floor"] for k, r in results.items()},
        "tvd_spread": {k: r["tvd_spread"] for k, r in results.items()},
        "max_tvd": tvds[worst], "max_tvd_distribution": worst,
        "layer_count_max_rel_diff": layers.pop("layer_count_max_rel_diff"),
        **layers,
        "mean": {k: r["mean"] for k, r in results.items()},
        "entries": {k: r["entries"] for k, r in results.items()},
        "real": {name: facts for name, (_, facts) in reals.items()},
        "simulated": {"events": args.events, "pileup": PILEUP, "seed": args.seed,
                      "vertex_sigma_z": args.vertex_sigma_z,
                      "first_event_id": FIRST_SIM_ID,
                      "hits_mean": float(np.mean([len(e["hits"]) for e in events])),
                      "particles_mean": float(np.mean([len(e["particles"]) for e in events])),
                      "vertex_sigma_z_measured": vertex_sigma_z(
                          [e["particles"] for e in events])},
        "histograms": {k: {"hist": r["hist"], "categories": r["categories"]}
                       for k, r in results.items()},
        **shapes,
    }
    if args.checkpoints is not None:
        from sim_vs_real_models import model_gaps

        out.update(model_gaps(args.config, args.checkpoints, args.data, events,
                              twins["sample"], FIRST_SIM_ID))
    out["seconds"] = time.perf_counter() - start
    if args.plots is not None:
        args.plots.mkdir(parents=True, exist_ok=True)
        for key, result in results.items():
            plot(key, result, args.plots / (key.replace("/", "_") + ".png"))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(f"{'distribution':40s} {'TVD':>6s} {'floor':>6s} {'spread':>6s}  mean real / sim")
    for key in results:
        m, spread = out["mean"][key], out["tvd_spread"][key]
        print(f"{key:40s} {tvds[key]:6.3f} {out['tvd_floor'][key]:6.3f} "
              f"{'' if spread is None else f'{spread:6.3f}':>6s}  "
              f"{m['real']:.4g} / {m['sim']:.4g}")
    print_shape_tables(out)
    print(f"max TVD {out['max_tvd']:.3f} ({worst}); hits per layer of event 21001: largest "
          f"relative difference {out['layer_count_max_rel_diff']:+.3f}, total "
          f"{out['total_hits_rel_diff']:+.3f}; {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
