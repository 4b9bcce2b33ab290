"""Simulated vs real events: the distributions the models see, side by side.

    python benchmarks/sim_vs_real.py --json out.json --plots DIR [--quick]
        [--vertex-sigma-z 50] [--events 8] [--seed 0]
        [--checkpoints DIR --config PIPELINE.yaml]

Two real events of the later TrackML release (sigma_z ~ 50 mm), each beside simulated twins
(``--events`` pile-up-200 events at ``--vertex-sigma-z``): ``event21001`` in its pixel
projection (volumes 7, 8, 9; truth only on pixel hits) beside simulated events projected the
same way, and ``sample`` (a ~5% particle subsample of a real event, plus noise) beside each
simulated event cut down the same way (:func:`trkx.realism.distributions.subsample`).

Every distribution of :mod:`trkx.realism.distributions` (its docstring lists them) is
histogrammed on its fixed bins and compared by its total variation distance (TVD);
``tvd_floor`` is the median TVD that drawing the real sample's size from the simulated
histogram gives (finite statistics alone; a lower bound), ``tvd_spread`` the median TVD of
one simulated twin from the others (event-to-event variation: which vertices, which particle
clusters; the yardstick for a single real event). ``layer_count_max_rel_diff`` is the
largest ``|N_sim - N_real| / N_real`` over the (volume, layer) hit counts of event 21001
(``N_sim``: mean over the simulated events).

With ``--checkpoints DIR --config PIPELINE.yaml`` the trained models run whole on event 21001,
the sample event and their twins (truth projected the same way on both;
:func:`model_gaps.model_gaps`): per-stage signal-edge efficiency
(:func:`trkx.tracks.evaluate.stage_losses.stage_edges`), track efficiency and their gaps real -
simulated. ``--quick``: two simulated events, under a minute on 2 cores.

``cell_shape_tvd``: ``{comparison: {volume: {feature: TVD}}}`` of the cluster-shape features
(:data:`trkx.realism.distributions.SHAPE_FEATURES`) between a real event and the same kind of
hits of the whole simulated events, with ``cell_shape_tvd_floor`` and ``cell_shape_entries``; the
comparisons ``{sample,event21001}/particle_hits`` (truth ``particle_id != 0``; event 21001:
volumes 7, 8, 9) and ``{sample,event21001}/all_hits`` (every hit with cells, all volumes).
``--shapes-only`` computes just this table (seconds):

    python benchmarks/sim_vs_real.py --shapes-only --quick --json shapes.json

``--material`` compares only what the material does to a track
(:func:`trkx.realism.material.material_facts`: the pixel crossings' circle RMS and the pT lost
across the detector, prompt 1-2 GeV particles) between the sample event and the twins, simulated
with ``--field-map``, ``--support-fraction`` and ``--energy-loss`` as ``trkx simulate`` takes
them (the fit of trkx.data.simulate.physics), and the material from one crossing to the next
by volume groups (:func:`trkx.realism.material.material_between_crossings`: the table the
calibrated fit's scattering reads, trkx.tracks.fit.covariance), the real sample event's beside
the twins' (pooled):

    python benchmarks/sim_vs_real.py --material --events 2 --field-map solenoid \
        --support-fraction 5.9 --energy-loss 1.2 --json material.json
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

from pathlib import Path

import harness
import numpy as np
import pandas as pd
from material_twins import PILEUP, material, simulate
from model_gaps import FIRST_SIM_ID, REAL_EVENT, SAMPLE_EVENT, model_gaps

from trkx.data.detector import load_detector
from trkx.data.particle_id import decode_particle_id
from trkx.data.simulate.physics import FIELD_MAPS, PhysicsConfig
from trkx.data.truth import layer_key
from trkx.realism.distributions import (
    BINS,
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
from trkx.tracks.evaluate.projection import PIXEL_TRUTH, read_tables


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
    real = read_tables(data / REAL_EVENT, PIXEL_TRUTH, cells=True)
    sample = read_tables(data / SAMPLE_EVENT, "truth", cells=True)
    event21001 = event_view(real["hits"], real["cells"], real["particles"], real["truth"],
                            PIXEL_VOLUMES)
    sample_view = event_view(sample["hits"], sample["cells"], sample["particles"],
                             sample["truth"])
    return {
        "event21001": (event21001, {"hits": len(real["hits"]),
                                    "particles": len(real["particles"]),
                                    "truth_hits": int(event21001.truth_hit.sum()),
                                    "vertex_sigma_z": vertex_sigma_z([real["particles"]])}),
        "sample": (sample_view, {"hits": len(sample_view.hits),
                                 "particles": len(sample["particles"]),
                                 "noise_share": float((sample["truth"]["particle_id"] == 0)
                                                      .mean()),
                                 "vertex_sigma_z": vertex_sigma_z([sample["particles"]])}),
    }


def twin_views(events: list[dict[str, pd.DataFrame]], sample_facts: dict, seed: int
               ) -> dict[str, list[EventView]]:
    """Pixel-projected twins of event 21001, subsampled twins of the sample event, and the
    whole simulated events (``full``)."""
    whole, pixel, sampled = [], [], []
    for i, t in enumerate(events):
        tables = (t["hits"], t["cells"], t["particles"], t["truth"])
        whole.append(event_view(*tables))
        pixel.append(event_view(*tables, PIXEL_VOLUMES))
        rng = np.random.default_rng([seed, FIRST_SIM_ID + i, 1])
        sampled.append(subsample(whole[-1], sample_facts["particles"],
                                 sample_facts["noise_share"], rng))
    return {"event21001": pixel, "sample": sampled, "full": whole}


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
    real = np.asarray(result["hist"]["real"]) / sum(result["hist"]["real"])
    sim = np.asarray(result["hist"]["sim"]) / sum(result["hist"]["sim"])
    fig, ax = harness.pyplot().subplots(figsize=(7, 4))
    edges = BINS[key.split("/", 1)[1]]
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
    harness.save_figure(fig, path, dpi=100)


def parse_args(argv: list[str] | None):
    parser = harness.parser(__doc__, data=True, seed=True, plots=True, require_json=True,
                            quick="two simulated events (under a minute without models)")
    parser.add_argument("--events", type=int, default=8, metavar="N",
                        help="simulated pile-up-200 twins (default 8; 2 with --quick)")
    parser.add_argument("--vertex-sigma-z", type=float, default=50.0, metavar="MM", help="lumi"
                        "nous region of the twins (default 50, the real events' release)")
    parser.add_argument("--shapes-only", action="store_true",
                        help="only the per-volume cluster-shape TVD table (seconds)")
    parser.add_argument("--material", action="store_true", help="only the material "
                        "comparison (circle RMS, pT lost) against the sample event")
    parser.add_argument("--field-map", choices=FIELD_MAPS, default="uniform",
                        help="the twins' field (trkx simulate --field-map)")
    parser.add_argument("--support-fraction", type=float, default=1.0, metavar="F",
                        help="the twins' support material (trkx simulate --support-fraction)")
    parser.add_argument("--energy-loss", type=float, default=0.0, metavar="MEV_PER_MM",
                        help="the twins' energy loss (trkx simulate --energy-loss)")
    parser.add_argument("--checkpoints", type=Path, metavar="DIR", help="trained models (with "
                        "--config): their efficiencies on the real events and the twins")
    parser.add_argument("--config", type=Path, metavar="PIPELINE.yaml")
    args = harness.parse(parser, argv)
    if args.quick:
        args.events = 2
    if args.events < 1:
        parser.error(f"--events must be >= 1, got {args.events}")
    if not (np.isfinite(args.vertex_sigma_z) and args.vertex_sigma_z > 0):
        parser.error(f"--vertex-sigma-z must be a positive length in mm: {args.vertex_sigma_z}")
    if (args.checkpoints is None) != (args.config is None):
        parser.error("--checkpoints and --config go together")
    for part in (REAL_EVENT, SAMPLE_EVENT):
        if not (args.data / f"{part}-hits.csv.gz").is_file():
            parser.error(f"{args.data / part}-hits.csv.gz: no such file (--data or $TRKX_DATA "
                         "must name the TrackML data folder)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.material:
        return material(args)
    reals = real_views(args.data)
    physics = PhysicsConfig(field_map=args.field_map, support_fraction=args.support_fraction,
                            energy_loss=args.energy_loss)
    events = simulate(args.events, args.seed, args.vertex_sigma_z, physics)
    out = {"real": {name: facts for name, (_, facts) in reals.items()},
           "simulated": {"events": args.events, "pileup": PILEUP, "seed": args.seed,
                         "vertex_sigma_z": args.vertex_sigma_z, "first_event_id": FIRST_SIM_ID},
           **shape_tables(reals, events, np.random.default_rng([args.seed, 3]))}
    if args.shapes_only:
        harness.write_json(args.json, out)
        print_shape_tables(out)
        return 0
    twins = twin_views(events, reals["sample"][1], args.seed)
    rng = np.random.default_rng([args.seed, 2])
    results = {**distributions("event21001", reals["event21001"][0], twins["event21001"], rng),
               **distributions("sample", reals["sample"][0], twins["sample"], rng,
                               skip=("noise_share",))}
    layers = layer_counts(reals["event21001"][0], twins["full"])
    tvds = {k: r["tvd"] for k, r in results.items()}
    worst = max(tvds, key=tvds.get)
    out["simulated"].update(
        hits_mean=float(np.mean([len(e["hits"]) for e in events])),
        particles_mean=float(np.mean([len(e["particles"]) for e in events])),
        vertex_sigma_z_measured=vertex_sigma_z([e["particles"] for e in events]))
    out.update({"tvd": tvds, "max_tvd": tvds[worst], "max_tvd_distribution": worst, **layers,
                **{key: {k: r[key] for k, r in results.items()}
                   for key in ("tvd_floor", "tvd_spread", "mean", "entries")},
                "histograms": {k: {"hist": r["hist"], "categories": r["categories"]}
                               for k, r in results.items()}})
    if args.checkpoints is not None:
        out.update(model_gaps(args.config, args.checkpoints, args.data, events,
                              twins["sample"]))
    if args.plots is not None:
        for key, result in results.items():
            plot(key, result, args.plots / (key.replace("/", "_") + ".png"))
    harness.write_json(args.json, out)
    print(f"{'distribution':40s} {'TVD':>6s} {'floor':>6s} {'spread':>6s}  mean real / sim")
    for key in results:
        m, spread = out["mean"][key], out["tvd_spread"][key]
        print(f"{key:40s} {tvds[key]:6.3f} {out['tvd_floor'][key]:6.3f} "
              f"{'' if spread is None else f'{spread:6.3f}':>6s}  "
              f"{m['real']:.4g} / {m['sim']:.4g}")
    print_shape_tables(out)
    print(f"max TVD {out['max_tvd']:.3f} ({worst}); hits per layer of event 21001: "
          f"{out['layer_count_max_rel_diff']:+.3f} (total {out['total_hits_rel_diff']:+.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
