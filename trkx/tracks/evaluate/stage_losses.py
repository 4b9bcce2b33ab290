"""Where each learned stage loses the signal, and what tracks its graph makes: the analysis of
a trained pipeline's stage graphs (the records ``trkx infer --graphs`` writes per stage, or
``TrainedPipeline.event_tracks(..., stage_graphs=True)`` returns). benchmarks/physics.py drives it.

- :func:`stage_edges`: per stage, signal-edge efficiency (cumulative and of the edges the
  stage received), purity (truth-graph edges among kept edges, docs/design.md) and edges per
  hit, with the stage's cut (``scores >= cut``); the share of the signal truth pairs (both
  hits signal, one per unordered pair) kept, overall and with both hits in the pixel barrel;
- :func:`track_figures`: tracks built by the pipeline's builder, double-majority efficiency,
  fake and duplicate rates (binomial errors), TrackML score;
- :func:`upper_bound`: the same with truth labels (``y``) as scores, i.e. what a perfect later
  stage would reach on a given graph;
- :func:`edge_losses`: where signal truth edges are lost (layer pairs, pT, first/last edge of
  a particle, overlap double hits) and by which stage;
- :func:`efficiency_by`: signal-edge efficiency per stage in bins of pT, eta or the particle's
  vertex |z| (``VERTEX_Z_BINS``, mm: where along the beam each stage loses the far vertices);
- :func:`efficiency_by_origin`: track efficiency of the signal particles by the radius of their
  production point, ``r_v = sqrt(vx^2 + vy^2)`` (prompt: ``r_v <= 1 mm``; the rest are
  secondaries, made in the material or by decays).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from trkx.arrays import as_numpy
from trkx.data.record_type import Record
from trkx.data.truth import layer_key
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.edge_metrics import edge_metrics, pool_edge_metrics
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary

PT_BINS = np.array([0.0, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, math.inf])
ETA_BINS = np.linspace(-4.0, 4.0, 17)
ORIGIN_BINS = np.array([0.0, 1.0, 10.0, 30.0, 100.0, 300.0, math.inf])   # r_v, mm
VERTEX_Z_BINS = np.array([0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, math.inf])   # |v_z|, mm


def pair_keys(edges: np.ndarray, n: int) -> np.ndarray:
    """One int64 key per unordered hit pair."""
    return np.minimum(edges[0], edges[1]) * n + np.maximum(edges[0], edges[1])


def signal_truth_pairs(record: Record) -> np.ndarray:
    """[2, T] signal truth-graph edges (both hits signal), one per unordered pair."""
    edges = as_numpy(record.track_edges).astype(np.int64)
    signal_hit = as_numpy(record.signal_hit).astype(bool)
    edges = edges[:, signal_hit[edges[0]] & signal_hit[edges[1]]]
    _, first = np.unique(pair_keys(edges, int(record.num_nodes)), return_index=True)
    return edges[:, np.sort(first)]


def kept_keys(record: Record, cut: float | None) -> np.ndarray:
    """Pair keys of the record's edges with ``scores >= cut`` (all when ``cut`` is None)."""
    edges = as_numpy(record.edge_index).astype(np.int64)
    keep = np.ones(edges.shape[1], bool)
    if cut is not None:
        keep = as_numpy(record.scores) >= cut
    return np.unique(pair_keys(edges[:, keep], int(record.num_nodes)))


@dataclass(frozen=True)
class StageGraphs:
    """The test-event records of one stage and the cut that stage applies to its scores.

    :meth:`kept` and :meth:`signal` are made once per event and kept: every analysis below
    reads them, and an embedding graph's key set (millions of edges) costs a sort."""

    name: str
    records: list[Record]
    cut: float | None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def kept(self, event: int) -> np.ndarray:
        """:func:`kept_keys` of event ``event``'s record at the stage's cut."""
        key = ("kept", event)
        if key not in self._cache:
            self._cache[key] = kept_keys(self.records[event], self.cut)
        return self._cache[key]

    def signal(self, event: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(pairs, keys, kept)`` of event ``event``: its :func:`signal_truth_pairs`, their
        :func:`pair_keys` and whether the stage keeps each."""
        key = ("signal", event)
        if key not in self._cache:
            record = self.records[event]
            pairs = signal_truth_pairs(record)
            keys = pair_keys(pairs, int(record.num_nodes))
            self._cache[key] = (pairs, keys, np.isin(keys, self.kept(event)))
        return self._cache[key]


def pipeline_stages(graphs: dict[str, list[Record]], builder: TrackBuilder) -> list[StageGraphs]:
    """The stages of a trained pipeline from its graphs (``{stage: records}``): the embedding's
    and the filter's whole (the filter's hold only the edges it kept; a cut of None ignores
    their scores), the GNN's at the track builder's cut."""
    cut = builder.edge_cut
    return [StageGraphs("embedding", graphs["embedding"], None),
            StageGraphs("filter", graphs["filter"], None), StageGraphs("gnn", graphs["gnn"], cut)]


def stage_edges(stages: list[StageGraphs]) -> dict[str, dict]:
    """Pooled edge efficiency/purity per stage, cumulative and of the received edges."""
    report: dict[str, dict] = {}
    previous: list[np.ndarray] | None = None
    for stage in stages:
        pooled = pool_edge_metrics([edge_metrics(_with_cut_scores(r, stage.cut),
                                                 stage.cut if stage.cut is not None else 0.5)
                                    for r in stage.records])
        signal = [stage.signal(event) for event in range(len(stage.records))]
        truth = [pairs for pairs, _, _ in signal]
        kept = [np.unique(keys[here]) for _, keys, here in signal]
        barrel_kept, barrel_all = _pixel_barrel_pairs(stage.records, truth, kept)
        received = pooled["n_signal_kept"]
        if previous is not None:
            before = sum(len(p) for p in previous)
            received = pooled["n_signal_kept"] / max(before, 1)
        else:
            received = pooled["efficiency"]
        n_hits = sum(int(r.num_nodes) for r in stage.records)
        report[stage.name] = {
            "cut": stage.cut, "efficiency": pooled["efficiency"],
            "efficiency_err": pooled["efficiency_err"], "efficiency_of_received": received,
            "purity": pooled["purity"], "purity_pid": pooled["purity_pid"],
            "edges_per_hit": pooled["n_kept"] / max(n_hits, 1),
            "n_kept": pooled["n_kept"], "n_signal_truth_edges": pooled["n_signal_truth_edges"],
            "signal_pairs": sum(len(k) for k in kept) / max(sum(t.shape[1] for t in truth), 1),
            "pixel_barrel_signal_pairs": barrel_kept / max(barrel_all, 1),
            "n_pixel_barrel_signal_pairs": barrel_all}
        previous = kept
    return report


#: The pixel barrel's volume id (trkx.data.summary).
PIXEL_BARREL = 8


def _pixel_barrel_pairs(records: list[Record], truth: list[np.ndarray], kept: list[np.ndarray],
                        ) -> tuple[int, int]:
    """``(kept, all)`` signal truth pairs with both hits in the pixel barrel, over the records
    (``truth``: each record's :func:`signal_truth_pairs`; ``kept``: its kept signal pair keys,
    :func:`pair_keys`)."""
    n_kept = n_all = 0
    for record, pairs, keys in zip(records, truth, kept):
        n = int(record.num_nodes)
        volume = as_numpy(record.volume_id).astype(np.int64)
        barrel = (volume[pairs[0]] == PIXEL_BARREL) & (volume[pairs[1]] == PIXEL_BARREL)
        n_all += int(barrel.sum())
        n_kept += int(np.isin(pair_keys(pairs[:, barrel], n), keys).sum())
    return n_kept, n_all


def _with_cut_scores(record: Record, cut: float | None) -> Record:
    if cut is None and getattr(record, "scores", None) is not None:
        record = record.clone()
        del record.scores
    return record


def with_truth_scores(record: Record) -> Record:
    """A copy whose ``scores`` are the truth labels ``y`` (a perfect edge classifier)."""
    out = record.clone()
    out.scores = out.y.float()
    return out


def track_figures(records: list[Record], builder: TrackBuilder,
                  cuts: MetricCuts | None = None) -> tuple[dict, list]:
    """Overall tracking figures of ``records`` (with ``scores``) and the per-event tables."""
    cuts = cuts if cuts is not None else MetricCuts()
    evaluations = []
    for record in records:
        labels = builder.build(record)
        table = tracks_frame(record.hit_id, labels, int(record.event_id))
        evaluations.append(evaluate_event(truth_from_record(record), table, cuts))
    return overall_summary(evaluations), evaluations


def upper_bound(records: list[Record], builder: TrackBuilder,
                cuts: MetricCuts | None = None) -> dict:
    """Track figures with truth labels as scores (what perfect later stages would give)."""
    return track_figures([with_truth_scores(r) for r in records], builder, cuts)[0]


def _layer_key(record: Record) -> np.ndarray:
    return layer_key(as_numpy(record.volume_id), as_numpy(record.layer_id))


def edge_losses(stages: list[StageGraphs], top: int = 8) -> dict[str, dict]:
    """Where the signal truth edges are lost, per stage (by category, counts and shares).

    Categories of a lost edge: its (volume, layer) pair, the pT bin of its particle, its place
    on the particle's path (``first``/``last``/``middle`` edge) and whether one of its hits is
    an overlap double hit (another hit of the same particle on the same layer).
    """
    out: dict[str, dict] = {}
    for index, stage in enumerate(stages):
        lost: dict[str, Counter] = {"layer_pair": Counter(), "pt": Counter(),
                                    "position": Counter(), "overlap": Counter()}
        totals: dict[str, Counter] = {k: Counter() for k in lost}
        for event, record in enumerate(stage.records):
            truth, keys, here = stage.signal(event)
            if index > 0:
                received = np.isin(keys, stages[index - 1].kept(event))
            else:
                received = np.ones(len(keys), bool)
            categories = _edge_categories(record, truth)
            for name, values in categories.items():
                totals[name].update(values[received].tolist())
                lost[name].update(values[received & ~here].tolist())
        out[stage.name] = {
            name: [{"category": c, "lost": int(k), "of": int(totals[name][c]),
                    "share_lost": k / max(totals[name][c], 1)}
                   for c, k in lost[name].most_common(top)]
            for name in lost}
    return out


def _edge_categories(record: Record, truth: np.ndarray) -> dict[str, np.ndarray]:
    layer = _layer_key(record)
    pid = as_numpy(record.particle_id).astype(np.int64)
    pt = as_numpy(record.pt).astype(np.float64)
    src, dst = truth
    pairs = np.array([f"{layer[a] // 1000}:{layer[a] % 1000}->{layer[b] // 1000}:{layer[b] % 1000}"
                      for a, b in zip(src, dst)], dtype=object)
    pt_bin = np.digitize(pt[src], PT_BINS) - 1
    pt_label = np.array([f"{PT_BINS[i]:g}-{PT_BINS[i + 1]:g}" for i in pt_bin], dtype=object)
    # Position on the particle's chain: a hit with no incoming truth edge starts it.
    edges = as_numpy(record.track_edges).astype(np.int64)
    has_in = np.zeros(int(record.num_nodes), bool)
    has_out = np.zeros(int(record.num_nodes), bool)
    has_in[edges[1]] = True
    has_out[edges[0]] = True
    position = np.where(~has_in[src], "first", np.where(~has_out[dst], "last", "middle"))
    # Overlap double hit: another hit of the same particle on the same layer.
    key = pid * 100_000 + layer
    counts = Counter(key[pid != 0].tolist())
    double = np.array([counts[k] > 1 for k in key.tolist()])
    overlap = np.where(double[src] | double[dst], "overlap", "single")
    return {"layer_pair": pairs, "pt": pt_label, "position": position.astype(object),
            "overlap": overlap.astype(object)}


def efficiency_by(stages: list[StageGraphs], variable: str, bins: np.ndarray,
                  absolute: bool = False) -> dict:
    """Signal-edge efficiency per stage in bins of a per-hit record field of the particle
    (``pt``, ``eta``, ``vertex_z``; of its magnitude with ``absolute``):
    ``kept signal pairs / signal pairs`` per bin, each pair binned by its first hit's value
    (both hits belong to one particle)."""
    result = {"bins": bins.tolist(), "variable": f"|{variable}|" if absolute else variable}
    for stage in stages:
        kept_total = np.zeros(len(bins) - 1)
        all_total = np.zeros(len(bins) - 1)
        for event, record in enumerate(stage.records):
            truth, _, kept = stage.signal(event)
            value = as_numpy(getattr(record, variable)).astype(np.float64)[truth[0]]
            if absolute:
                value = np.abs(value)
            which = np.clip(np.digitize(value, bins) - 1, 0, len(bins) - 2)
            all_total += np.bincount(which, minlength=len(bins) - 1)
            kept_total += np.bincount(which, weights=kept, minlength=len(bins) - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            result[stage.name] = (kept_total / all_total).tolist()
    return result


def efficiency_by_origin(evaluations: list, radius: dict[int, dict[int, float]],
                         bins: np.ndarray = ORIGIN_BINS) -> dict:
    """Track efficiency of the signal particles in bins of their production radius.

    ``radius[event_id][particle_id]`` is ``r_v`` in mm (the particles table); per bin ``b``,
    ``efficiency_b = #{signal p in b matched by a track} / #{signal p in b}``, with the binomial
    error ``sqrt(e (1 - e) / n)``; ``prompt`` / ``displaced`` pool ``r_v <= 1 mm`` / the rest.
    """
    rows = []
    for evaluation in evaluations:
        table = evaluation.particles
        signal = table[table["signal"].to_numpy(dtype=bool)]
        of_event = radius[int(evaluation.event_id)]
        r_v = np.array([of_event[int(pid)] for pid in signal["particle_id"]], dtype=np.float64)
        rows.append((r_v, signal["n_matched_tracks"].to_numpy() > 0))
    r_v = np.concatenate([r for r, _ in rows]) if rows else np.zeros(0)
    found = np.concatenate([f for _, f in rows]) if rows else np.zeros(0, dtype=bool)

    def share(mask: np.ndarray) -> dict:
        n = int(mask.sum())
        e = float(found[mask].mean()) if n else float("nan")
        return {"efficiency": e, "efficiency_err": math.sqrt(e * (1 - e) / n) if n else
                float("nan"), "signal_particles": n}

    which = np.clip(np.digitize(r_v, bins, right=True) - 1, 0, len(bins) - 2)
    return {"bins_mm": bins.tolist(),
            "per_bin": [share(which == b) for b in range(len(bins) - 1)],
            "prompt": share(r_v <= bins[1]), "displaced": share(r_v > bins[1])}
