"""Track building and evaluation: which builder at which cut, and how long each takes.

    python benchmarks/tracks.py [--copies 20] [--repeat 7] [--quick] [--json PATH]

No trained model: the real TrackML sample event (5.5k hits, ``$TRKX_DATA/sample_event``) and a
full-size overlay of ``--copies`` phi-rotated copies of it (~110k hits at 20; particle and hit
ids made unique, weights renormalised) get the edges a graph constructor would give: the truth
graph with 2% lost plus, for every hit, its k = 6 nearest outer hits in (eta, phi) on other
layers; and scores drawn the way a good edge classifier scores them:

    truth edges                 s ~ Beta(6, 1)           (P(s < 0.5) = 0.5**6)
    same-particle, not truth    s ~ Beta(2, 2)
    other edges                 s ~ Beta(1, 30), a fraction 0.03 Beta(2, 3)

``builders``: every builder of BUILDERS on both events, scored with double-majority matching
(signal pT >= 1 GeV and >= 3 hits, candidate tracks >= 3 hits) and the TrackML score, with its
build seconds. ``evaluation``: on the overlay, the seconds of ``trkx evaluate``'s per-event work
(:func:`evaluate_event` matching, tables and TrackML score, plus :func:`event_summary`) and of
the binned rates of its plots, best and median of ``--repeat`` runs (target: <= 0.5 s).
``--quick``: the sample event only, a 2-copy overlay, 2 repeats.
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import statistics

import harness
import numpy as np
import torch
from scipy.spatial import cKDTree
from torch_geometric.data import Data

from trkx.data.io import load_event
from trkx.data.record import build_event_record
from trkx.data.truth import layer_key
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.binned import standard_rates
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import evaluate_event, event_summary

BUILDERS = [TrackBuilder("components", cc_cut=c) for c in (0.3, 0.5, 0.7, 0.8, 0.9)] + [
    TrackBuilder("walkthrough", walk_cut=c, max_layer_hits=m)
    for c in (0.1, 0.3, 0.5) for m in (1, 2, 3, 4)] + [
    TrackBuilder("walkthrough", walk_cut=0.3, sibling_ratio=r) for r in (0.0, 0.5, 1.0)]


def replicate_event(record: Data, copies: int, seed: int = 0) -> Data:
    """``copies`` phi-rotated overlays of ``record`` as one event (see module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(record.num_nodes)
    _, pid_code = np.unique(record.particle_id.numpy(), return_inverse=True)
    n_pid = int(pid_code.max()) + 1
    noise = record.particle_id.numpy() == 0
    max_hit = int(record.hit_id.max()) + 1
    fields: dict[str, list] = {k: [] for k in ("x", "pos", "hit_id", "particle_id", "pt", "eta",
                                                "nhits", "weight", "signal_hit", "volume_id",
                                                "layer_id", "track_edges")}
    for c in range(copies):
        pos = record.pos.clone()
        pos[:, 1] = torch.remainder(pos[:, 1] + rng.uniform(0, 2 * np.pi) + np.pi,
                                    2 * np.pi) - np.pi
        fields["pos"].append(pos)
        fields["hit_id"].append(record.hit_id + c * max_hit)
        pid = np.where(noise, 0, pid_code + c * n_pid + 1)
        fields["particle_id"].append(torch.from_numpy(pid.astype(np.int64)))
        for key in ("x", "pt", "eta", "nhits", "signal_hit", "volume_id", "layer_id"):
            fields[key].append(getattr(record, key))
        fields["weight"].append(record.weight / copies)
        fields["track_edges"].append(record.track_edges + c * n)
    out = Data(**{k: torch.cat(v, dim=-1 if k == "track_edges" else 0)
                  for k, v in fields.items()})
    out.num_nodes = n * copies
    out.event_id = torch.tensor(int(record.event_id))
    return out


def candidate_graph(record: Data, k: int = 6, truth_loss: float = 0.02,
                    seed: int = 0) -> np.ndarray:
    """[2, E] candidate edges: most of the truth graph plus k (eta, phi) neighbours per hit."""
    rng = np.random.default_rng(seed)
    pos = record.pos.numpy().astype(np.float64)
    r, phi, z = pos[:, 0], pos[:, 1], pos[:, 2]
    eta = np.arcsinh(z / r)
    layer = layer_key(record.volume_id.numpy(), record.layer_id.numpy())
    # Embed phi on a circle so neighbours wrap around at +-pi.
    points = np.stack([eta * 4.0, np.cos(phi) * 4.0, np.sin(phi) * 4.0], axis=1)
    _, neighbours = cKDTree(points).query(points, k=k + 1)
    src = np.repeat(np.arange(len(r)), k + 1)
    dst = neighbours.reshape(-1)
    keep = (src != dst) & (layer[src] != layer[dst]) & (r[dst] > r[src])
    noise_edges = np.stack([src[keep], dst[keep]])
    truth = record.track_edges.numpy()
    truth = truth[:, rng.random(truth.shape[1]) >= truth_loss]
    # Truth edges keep the particle's direction, the others point outwards in r (as a graph
    # constructor orders them); a neighbour pair that is also a truth edge is dropped.
    n = len(r)
    truth_pairs = np.minimum(truth[0], truth[1]) * n + np.maximum(truth[0], truth[1])
    noise_pairs = np.minimum(noise_edges[0], noise_edges[1]) * n + \
        np.maximum(noise_edges[0], noise_edges[1])
    _, first = np.unique(noise_pairs, return_index=True)
    noise_edges = noise_edges[:, first[~np.isin(noise_pairs[first], truth_pairs)]]
    return np.concatenate([truth, noise_edges], axis=1)


def gnn_like_scores(record: Data, edges: np.ndarray, true_a: float = 6.0,
                    hard_fake: float = 0.03, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores [E] for ``edges`` and their truth label ``y`` (see module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(record.num_nodes)
    truth = record.track_edges.numpy()
    truth_key = np.unique(np.concatenate([truth[0] * n + truth[1], truth[1] * n + truth[0]]))
    y = np.isin(edges[0] * n + edges[1], truth_key)
    pid = record.particle_id.numpy()
    same = (pid[edges[0]] == pid[edges[1]]) & (pid[edges[0]] != 0) & ~y
    fake = ~y & ~same
    score = np.empty(edges.shape[1])
    score[y] = rng.beta(true_a, 1.0, int(y.sum()))
    score[same] = rng.beta(2.0, 2.0, int(same.sum()))
    hard = fake & (rng.random(len(score)) < hard_fake)
    easy = fake & ~hard
    score[hard] = rng.beta(2.0, 3.0, int(hard.sum()))
    score[easy] = rng.beta(1.0, 30.0, int(easy.sum()))
    return score.astype(np.float32), y


def scored_event(record, seed: int):
    edges = candidate_graph(record, seed=seed)
    scores, y = gnn_like_scores(record, edges, seed=seed)
    record = record.clone()
    record.edge_index = torch.from_numpy(edges)
    record.scores = torch.from_numpy(scores)
    cut = scores >= 0.5
    stats = {"n_hits": int(record.num_nodes), "n_edges": int(edges.shape[1]),
             "edge_purity_at_0.5": float(y[cut].mean()),
             "truth_edges_at_0.5": float(cut[y].sum() / record.track_edges.shape[1])}
    return record, stats


def run_builders(record) -> list[dict]:
    truth = truth_from_record(record)
    graph = graph_from_record(record)
    rows = []
    for builder in BUILDERS:
        labels, seconds = harness.best_of(lambda b=builder: b.build_graph(graph))
        summary = event_summary(evaluate_event(truth, tracks_frame(record.hit_id, labels, 0)))
        rows.append({"method": builder.method,
                     "cut": builder.cc_cut if builder.method == "components"
                     else builder.walk_cut,
                     "max_layer_hits": builder.max_layer_hits
                     if builder.method == "walkthrough" else None,
                     "sibling_ratio": builder.sibling_ratio
                     if builder.method == "walkthrough" else None,
                     "build_s": seconds,
                     **{k: summary[k] for k in ("efficiency", "fake_rate", "duplicate_rate",
                                                "trackml_score", "n_tracks")}})
    return rows


def print_table(name: str, stats: dict, rows: list[dict]) -> None:
    print(f"\n{name}: {stats['n_hits']:,d} hits, {stats['n_edges']:,d} edges, "
          f"purity {stats['edge_purity_at_0.5']:.3f} and truth-edge efficiency "
          f"{stats['truth_edges_at_0.5']:.3f} at score 0.5")
    print(f"{'method':<12s} {'cut':>4s} {'layer':>5s} {'ratio':>5s} {'eff':>6s} "
          f"{'fake':>6s} {'dup':>6s} {'score':>6s} {'tracks':>7s} {'build s':>8s}")
    for row in rows:
        layer = "-" if row["max_layer_hits"] is None else str(row["max_layer_hits"])
        ratio = "-" if row["sibling_ratio"] is None else f"{row['sibling_ratio']:.1f}"
        print(f"{row['method']:<12s} {row['cut']:>4.1f} {layer:>5s} "
              f"{ratio:>5s} {row['efficiency']:>6.3f} "
              f"{row['fake_rate']:>6.3f} {row['duplicate_rate']:>6.3f} "
              f"{row['trackml_score']:>6.3f} {row['n_tracks']:>7,d} {row['build_s']:>8.3f}")


def evaluation_seconds(record: Data, repeat: int) -> dict:
    """Seconds of the default builder and of the evaluation of its tracks on ``record``."""
    labels, build_s = harness.best_of(lambda: TrackBuilder().build(record))
    submission = tracks_frame(record.hit_id, labels, 1)[["hit_id", "track_id"]]
    event_truth = truth_from_record(record)
    seconds: dict[str, list[float]] = {}
    for _ in range(repeat):
        with harness.timed(seconds, "evaluate"):
            evaluation = evaluate_event(event_truth, submission)
            summary = event_summary(evaluation)
        with harness.timed(seconds, "binned"):
            standard_rates(evaluation.particles, evaluation.tracks, 1.0, None, 3)
    print(f"evaluation of {int(record.num_nodes):,d} hits: best {min(seconds['evaluate']):.3f}"
          f" s (target <= 0.5 s), binned rates {min(seconds['binned']):.3f} s")
    return {"n_hits": int(record.num_nodes), "n_tracks_submitted": int(labels.max()) + 1,
            "walkthrough_build_s": build_s, "evaluate_best_s": min(seconds["evaluate"]),
            "evaluate_median_s": statistics.median(seconds["evaluate"]),
            "binned_rates_best_s": min(seconds["binned"]),
            "efficiency": summary["efficiency"], "trackml_score": summary["trackml_score"]}


def main() -> int:
    parser = harness.parser(__doc__, data=True, seed=True, quick="2 copies, 2 repeats")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    args = harness.parse(parser)
    if args.quick:
        args.copies, args.repeat = 2, 2
    prefix = args.data / "sample_event" / "event000000001"
    hits, particles, truth = load_event(prefix, ["hits", "particles", "truth"], detector=None)
    base = build_event_record(hits, None, particles, truth, use_cells=False, event_id=1)
    overlay = replicate_event(base, args.copies, args.seed)
    results: dict = {"builders": {}}
    for name, record in [("sample event", base), (f"{args.copies}-copy overlay", overlay)]:
        scored, stats = scored_event(record, args.seed)
        rows = run_builders(scored)
        print_table(name, stats, rows)
        results["builders"][name] = {"event": stats, "builders": rows}
        if record is overlay:
            results["evaluation"] = evaluation_seconds(scored, args.repeat)
    harness.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
