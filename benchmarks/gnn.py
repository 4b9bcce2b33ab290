"""Benchmark of the interaction-network GNN: kernels, whole model, inference, FLOPs.

Measures, side by side in one run. The machine is shared, so every comparison is
*interleaved* (A, B, A, B, ... after a warm-up round; best of the rounds) and recorded both as
wall time and as process CPU time; the side-by-side ratios use CPU time at ``--compare-threads``
(default 1), which other jobs on the machine cannot inflate. Inference seconds per event are
wall time at ``--threads``.

1. aggregation ``(D^T E, S^T E)`` forward+backward: CSR SpMM GraphOps vs PyG ``MessagePassing``
   aggregation (scatter-sum) vs ``index_add_``; and the gather ``S X`` as E x N CSR SpMM vs
   ``index_select`` (why the CSR GraphOps gathers by row selection);
2. the whole InteractionGNN (CSR GraphOps) vs the same network written with PyG
   ``MessagePassing`` (``tests/reference/pyg_interaction_gnn.py``): inference forward on the
   full graph, and a training step (forward+backward) on a phi sector of it (full-graph
   activations of a hidden-128, 8-iteration model need ~20 GB, more than this shared machine
   has);
3. inference seconds per event (fp32, and bf16 autocast), the FLOP count per event and the
   achieved fraction of the dense fp32/bf16 matmul rate measured in the same run;
4. with ``--records DIR`` of filter-stage records (edge_index, y, signal; ``pos`` and the
   filter's ``scores`` for a model with edge inputs) and a trained ``--checkpoint``: signal
   edge efficiency and edge purity at the checkpoint's cut (its working point ``edge_cut``).

A ``--checkpoint`` whose model takes edge inputs (``model.edge_features``, the default of
configs/gnn.yaml) is timed with the stand-in graph's edge geometry and a filter score of 1; the
PyG ``MessagePassing`` reference takes no edge inputs, so part 2 is left out for such a model.

Until filtered MU=200 graphs exist the graph is a realistic-size stand-in: the hits of one real
TrackML event (kaggle_hits, ~110k hits) joined to their ``--knn`` nearest neighbours in space,
directed inner -> outer (``graph_source`` in the JSON says which graph was used).

    python benchmarks/gnn.py --json gnn.json [--checkpoint runs/gnn/gnn.pt --records DIR]
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from scipy.spatial import cKDTree

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reference.pyg_interaction_gnn import InteractionLayer, PygInteractionGNN
from trkx.data.detector import load_detector
from trkx.data.features import hit_features
from trkx.data.io import read_part
from trkx.data.listing import record_paths
from trkx.edge_loss import edge_weights
from trkx.gnn.checkpoint import load_model
from trkx.gnn.inference import score_edges
from trkx.gnn.metrics import edge_metrics
from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import build_graph_ops
from trkx.gnn.records import check_graph_record


def interleaved(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, dict[str, float]]:
    """Best wall and process-CPU seconds of each function, run in turn for ``rounds`` rounds
    after one untimed warm-up round."""
    for fn in fns.values():
        fn()
    best = {name: {"wall": math.inf, "cpu": math.inf} for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            best[name]["cpu"] = min(best[name]["cpu"], time.process_time() - cpu)
            best[name]["wall"] = min(best[name]["wall"], time.perf_counter() - wall)
    return best


def knn_graph_from_hits(hits_file: Path, knn: int,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Node features, positions (r, phi, z) and inner -> outer edges to the ``knn`` nearest
    hits (3D, mm)."""
    hits = read_part(hits_file, "hits")
    x, _ = hit_features(hits, None, load_detector(), use_cells=False)
    xyz = hits[["x", "y", "z"]].to_numpy(np.float64)
    _, neighbours = cKDTree(xyz).query(xyz, k=knn + 1)
    src = np.repeat(np.arange(len(xyz)), knn)
    dst = neighbours[:, 1:].reshape(-1)
    r = np.hypot(xyz[:, 0], xyz[:, 1])
    inner = np.where(r[src] <= r[dst], src, dst)
    outer = np.where(r[src] <= r[dst], dst, src)
    pairs = np.unique(np.stack([inner, outer]), axis=1)
    pos = np.stack([r, np.arctan2(xyz[:, 1], xyz[:, 0]), xyz[:, 2]], axis=1)
    return (torch.from_numpy(np.asarray(x, np.float32)), torch.from_numpy(pos.astype(np.float32)),
            torch.from_numpy(pairs.astype(np.int64)))


def standin_edge_inputs(model: InteractionGNN, pos: torch.Tensor,
                        edge_index: torch.Tensor) -> torch.Tensor | None:
    """The edge inputs of a model that takes them: the edges' geometry and, in place of the
    filter's score, 1 (None for a model without edge inputs)."""
    from torch_geometric.data import Data

    from trkx.gnn.edge_inputs import model_edge_inputs

    record = Data(pos=pos, edge_index=edge_index, scores=pos.new_ones(edge_index.shape[1]))
    try:
        return model_edge_inputs(model, record, "stand-in graph")
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


def matmul_fn(dtype: torch.dtype, size: int = 2048) -> Callable[[], object]:
    """One dense ``size^3`` matmul in ``dtype`` (2 size^3 FLOPs)."""
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    return lambda: a @ b


def aggregation_timings(edge_index: torch.Tensor, num_nodes: int, width: int,
                        repeats: int) -> dict[str, dict[str, float]]:
    """Forward+backward seconds of ``(D^T E, S^T E)`` by each kernel, and of the gather."""
    num_edges = edge_index.shape[1]
    e = torch.randn(num_edges, width, requires_grad=True)
    x = torch.randn(num_nodes, width, requires_grad=True)
    weights = torch.randn(num_nodes, width)
    csr, scatter = (build_graph_ops(edge_index, num_nodes, k) for k in ("csr", "scatter"))
    layer = InteractionLayer(torch.nn.Identity(), torch.nn.Identity())

    def step(aggregate: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]):
        def run() -> None:
            m_in, m_out = aggregate(e)
            ((m_in + m_out) * weights).sum().backward()
            e.grad = None
        return run

    def pyg(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (layer.aggregate(t, edge_index[1], dim_size=num_nodes),
                layer.aggregate(t, edge_index[0], dim_size=num_nodes))

    def gather_step(ops) -> Callable[[], None]:
        def run() -> None:
            x_src, x_dst = ops.gather(x)
            (x_src + x_dst).sum().backward()
            x.grad = None
        return run

    from trkx.gnn.local_ops import transposed_incidence_csr
    s_matrix = transposed_incidence_csr(edge_index[0], num_nodes, torch.float32)
    s_matrix = s_matrix.to_sparse_coo().t().coalesce().to_sparse_csr()  # E x N
    x_plain = x.detach()
    return interleaved({
        "aggregate_csr": step(csr.aggregate),
        "aggregate_pyg_messagepassing": step(pyg),
        "aggregate_index_add": step(scatter.aggregate),
        "gather_csr_graphops": gather_step(csr),
        "gather_index_select_autograd": gather_step(scatter),
        "gather_forward_csr_spmm_ExN": lambda: torch.sparse.mm(s_matrix, x_plain),
        "gather_forward_index_select": lambda: x_plain.index_select(0, edge_index[0]),
    }, repeats)


def sector(x: torch.Tensor, edge_index: torch.Tensor, fraction: float):
    """Nodes whose phi (feature column 1, phi/pi) lies in the first ``fraction`` of [-1, 1],
    and the edges between them (relabelled)."""
    keep = x[:, 1] < -1 + 2 * fraction
    new_id = torch.full((x.shape[0],), -1, dtype=torch.long)
    new_id[keep] = torch.arange(int(keep.sum()))
    inside = keep[edge_index[0]] & keep[edge_index[1]]
    return x[keep], new_id[edge_index[:, inside]]


def model_timings(model: InteractionGNN, x: torch.Tensor, edge_index: torch.Tensor,
                  train_x: torch.Tensor, train_edges: torch.Tensor,
                  repeats: int) -> dict[str, dict[str, float]]:
    """InteractionGNN (CSR) vs the PyG MessagePassing version with the same parameters:
    inference forward on the full graph, forward+backward on the training sector."""
    reference = PygInteractionGNN(model.node_features, model.hidden, model.n_graph_iters,
                                  model.n_mlp_layers, model.activation, model.layer_norm)
    reference.load_state_dict(model.state_dict())
    ops = build_graph_ops(edge_index, x.shape[0], "csr")
    train_ops = build_graph_ops(train_edges, train_x.shape[0], "csr")

    def forward(net, *inputs) -> Callable[[], None]:
        def run() -> None:
            with torch.inference_mode():
                net.eval()(*inputs)
        return run

    def train_step(net, *inputs) -> Callable[[], None]:
        def run() -> None:
            net.train()(*inputs).square().mean().backward()
            net.zero_grad(set_to_none=True)
        return run

    timings = interleaved({"forward_in_csr": forward(model, x, ops),
                           "forward_pyg": forward(reference, x, edge_index)}, repeats)
    timings.update(interleaved({"train_step_in_csr": train_step(model, train_x, train_ops),
                                "train_step_pyg": train_step(reference, train_x, train_edges)},
                               repeats))
    return timings


def physics_metrics(model: InteractionGNN, cut: float, records: Path) -> dict[str, float]:
    """Signal edge efficiency and purity pooled over the records of ``records``."""
    from trkx.data.record import load_record
    from trkx.gnn.edge_inputs import model_edge_inputs

    scores, ys, signals = [], [], []
    for path in record_paths(records):
        data = load_record(path)
        check_graph_record(data, str(path))
        scores.append(score_edges(model, data.x, data.edge_index.long(), "csr",
                                  edge_attr=model_edge_inputs(model, data, str(path))))
        ys.append(data.y.bool())
        signals.append(data.signal.bool())
    y, signal, score = torch.cat(ys), torch.cat(signals), torch.cat(scores)
    metrics = edge_metrics(score, y, signal, edge_weights(y, signal, 1.0, 1.0, 1.0), cut)
    return {"signal_edge_efficiency": metrics.efficiency, "edge_purity": metrics.purity,
            "edge_auc": metrics.auc}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hits", type=Path,
                        default=REPO.parent / "shared" / "data" / "trackml" / "kaggle_hits"
                        / "event000001001-hits.csv.gz",
                        help="real TrackML hits file for the stand-in graph")
    parser.add_argument("--knn", type=int, default=4, help="neighbours per hit (default 4)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--train-fraction", type=float, default=0.125,
                        help="phi fraction of the graph used for the training-step timing")
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds (best counts)")
    parser.add_argument("--no-node-side-projection", action="store_true",
                        help="time the model with width-h gathers (model.node_side_projection)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="threads for the inference timing and the matmul rate")
    parser.add_argument("--compare-threads", type=int, default=1,
                        help="threads for the side-by-side comparisons (default 1)")
    parser.add_argument("--checkpoint", type=Path, help="trained gnn.pt (else random weights)")
    parser.add_argument("--records", type=Path,
                        help="filter-stage records with truth, for efficiency/purity")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    torch.manual_seed(0)

    start = time.perf_counter()
    x, pos, edge_index = knn_graph_from_hits(args.hits, args.knn)
    num_nodes, num_edges = x.shape[0], edge_index.shape[1]
    print(f"graph: {num_nodes} nodes, {num_edges} edges from {args.hits.name} "
          f"(kNN k={args.knn}) in {time.perf_counter() - start:.1f} s; threads {args.threads}, "
          f"load {os.getloadavg()[0]:.1f}")
    cut, padded = 0.5, False
    if args.checkpoint:
        model, stored = load_model(args.checkpoint)
        cut = float(stored.working_point.get("edge_cut", cut))
        if model.node_features != x.shape[1]:
            # kaggle_hits has no cells: zero columns keep the shapes (timing only)
            x = torch.cat([x, x.new_zeros(num_nodes, model.node_features - x.shape[1])], 1)
            padded = True
    else:
        model = InteractionGNN(x.shape[1], args.hidden, args.iters,
                               node_side_projection=not args.no_node_side_projection)

    figures: dict[str, object] = {
        "graph_source": f"real hits {args.hits.name}, {args.knn}-NN in space, inner->outer "
                        "(stand-in until filtered MU=200 graphs exist)",
        "num_nodes": num_nodes, "num_edges": num_edges, "hidden": model.hidden,
        "n_graph_iters": model.n_graph_iters, "threads": args.threads,
        "compare_threads": args.compare_threads,
        "node_side_projection": model.node_side_projection,
        "features_zero_padded": padded, "edge_features": model.edge_features,
        "load_average_1min": os.getloadavg()[0],
    }
    edge_attr = standin_edge_inputs(model, pos, edge_index)
    torch.set_num_threads(args.compare_threads)
    agg = aggregation_timings(edge_index, num_nodes, model.hidden, args.repeats)
    train_x, train_edges = sector(x, edge_index, args.train_fraction)
    figures["train_step_graph"] = {"num_nodes": train_x.shape[0],
                                   "num_edges": train_edges.shape[1]}
    whole = {} if model.edge_features else model_timings(model, x, edge_index, train_x,
                                                         train_edges, args.repeats)
    for key, value in {**agg, **whole}.items():
        figures[f"{key}_s"] = value["cpu"]
        figures[f"{key}_wall_s"] = value["wall"]
        print(f"  {key:32s} cpu {value['cpu']:8.3f} s   wall {value['wall']:8.3f} s")

    def ratio(slow: str, fast: str) -> float | None:
        if f"{slow}_s" not in figures:      # part 2, left out for a model with edge inputs
            return None
        return figures[f"{slow}_s"] / figures[f"{fast}_s"]

    figures["spmm_vs_messagepassing_speedup"] = ratio("aggregate_pyg_messagepassing",
                                                      "aggregate_csr")
    figures["spmm_vs_index_add_speedup"] = ratio("aggregate_index_add", "aggregate_csr")
    figures["in_vs_pyg_forward_speedup"] = ratio("forward_pyg", "forward_in_csr")
    figures["in_vs_pyg_train_step_speedup"] = ratio("train_step_pyg", "train_step_in_csr")

    torch.set_num_threads(args.threads)
    per_edge, per_node = model.flops_per_edge_and_node()
    flops = per_edge * num_edges + per_node * num_nodes + 2 * model.n_graph_iters * (
        model.hidden * num_edges)
    figures["flops_per_event"] = flops
    timed = interleaved({
        "inference_fp32": lambda: score_edges(model, x, edge_index, "csr",
                                              edge_attr=edge_attr),
        "inference_bf16": lambda: score_edges(model, x, edge_index, "csr", precision="bf16",
                                              edge_attr=edge_attr),
        "matmul_fp32": matmul_fn(torch.float32),
        "matmul_bf16": matmul_fn(torch.bfloat16),
    }, args.repeats)
    figures["matmul_fp32_flops"] = 2 * 2048**3 / timed["matmul_fp32"]["wall"]
    figures["matmul_bf16_flops"] = 2 * 2048**3 / timed["matmul_bf16"]["wall"]
    inference_fp32 = timed["inference_fp32"]["wall"]
    inference_bf16 = timed["inference_bf16"]["wall"]
    figures["inference_seconds"] = min(inference_fp32, inference_bf16)
    figures["inference_seconds_fp32"] = inference_fp32
    figures["inference_seconds_bf16"] = inference_bf16
    figures["inference_cpu_seconds_fp32"] = timed["inference_fp32"]["cpu"]
    figures["inference_cpu_seconds_bf16"] = timed["inference_bf16"]["cpu"]
    figures["matmul_fraction"] = flops / inference_fp32 / figures["matmul_fp32_flops"]
    figures["matmul_fraction_bf16"] = flops / inference_bf16 / figures["matmul_bf16_flops"]
    figures["load_average_1min_end"] = os.getloadavg()[0]
    print(f"dense matmul 2048^3 ({args.threads} threads): fp32 "
          f"{figures['matmul_fp32_flops'] / 1e9:.0f} GFLOP/s, bf16 "
          f"{figures['matmul_bf16_flops'] / 1e9:.0f} GFLOP/s")
    print(f"inference: fp32 {inference_fp32:.2f} s, bf16 {inference_bf16:.2f} s per event; "
          f"{flops / 1e9:.0f} GFLOP; fraction of dense matmul rate fp32 "
          f"{figures['matmul_fraction']:.2f}, bf16 {figures['matmul_fraction_bf16']:.2f}")

    if args.records and args.checkpoint:
        figures.update(physics_metrics(model, cut, args.records))
    else:
        figures["signal_edge_efficiency"] = None
        figures["edge_purity"] = None
        figures["physics_note"] = ("needs --checkpoint (trained GNN) and --records "
                                   "(filter-stage MU=200 records with y, signal)")
    print(json.dumps({k: figures[k] for k in ("signal_edge_efficiency", "edge_purity",
                                              "spmm_vs_messagepassing_speedup",
                                              "in_vs_pyg_forward_speedup",
                                              "in_vs_pyg_train_step_speedup",
                                              "inference_seconds", "matmul_fraction")}))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
