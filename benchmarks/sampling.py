"""Benchmark of minibatch GNN training by bulk subgraph sampling.

Measures, in one run:

1. sampling throughput (subgraphs/s) of the sparse-product sampler with k = 1, 8, 64
   minibatches per product, against one minibatch at a time with a Python BFS loop with the
   same fan-out and node cap (tests/reference/bfs_sampling.py; adjacency lists built once,
   outside the clock; ``bulk_speedup_k64`` is k = 64 over this loop) and, without fan-out and
   cap, ``torch_geometric.utils.k_hop_subgraph`` in a loop; every sampler builds the same kind of
   record (relabelled edges, features, labels, target mask);
2. memory of one training step, minibatch vs full graph: on CUDA the peak allocated bytes; on
   CPU the bytes autograd saves for the backward pass (activations: what sets a step's peak),
   counted with ``torch.autograd.graph.saved_tensors_hooks`` (``peak_memory_method`` says which);
3. time to quality: the same model trained full-graph (one event per step) and on sampled
   minibatches (one minibatch per step) for the same wall-clock budget each, validation edge
   AUC and efficiency/purity (full graphs, at cut 0.5) against training wall time (evaluation is
   off the clock), final figures and a plot; ``time_to_quality_ratio`` is the minibatch run's
   wall time to the full-graph run's final AUC over the full-graph wall time. When a whole
   event's step would not fit in the memory free now (1.5x the bytes autograd saves), the
   full-graph run recomputes each iteration in its backward pass
   (``fullgraph_checkpoint_iterations`` in the JSON) instead of being killed.

Graphs: filter-stage records from ``--events DIR`` (``*.pt`` with x, edge_index, y, signal; the
last file validates), or, by default, a stand-in simulated here: MU=``--pileup`` events from
``trkx simulate``, candidate edges = the truth graph plus every hit's ``--knn`` nearest hits in
space, directed inner -> outer and labelled by trkx.data.truth.edge_truth (``graph_source`` in
the JSON says which). ``--quick``: tiny events and budget, to check that it runs.

    python benchmarks/sampling.py --json benchmarks/results/sampling.json [--events DIR]
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import random
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
import torch

from tests.reference.bfs_sampling import bfs_subgraph, neighbour_lists
from trkx.gnn.metrics import edge_metrics
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.datamodule import SampledMinibatches, SamplingConfig
from trkx.gnn.sampling.sampler import (
    sample_subgraphs,
    source_incidence_transposed,
    symmetric_adjacency,
)


def standin_graph(record, knn: int):
    """Truth edges + ``knn`` nearest hits in space, inner -> outer, labelled."""
    from scipy.spatial import cKDTree
    from torch_geometric.data import Data

    from trkx.data.truth import edge_truth
    r, phi, z = (record.pos[:, i].double().numpy() for i in range(3))
    xyz = np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    _, near = cKDTree(xyz).query(xyz, k=knn + 1)
    src = np.repeat(np.arange(len(xyz)), knn)
    pairs = np.concatenate([np.stack([src, near[:, 1:].reshape(-1)]),
                            record.track_edges.numpy()], axis=1)
    inner = np.where(r[pairs[0]] <= r[pairs[1]], pairs[0], pairs[1])
    outer = np.where(r[pairs[0]] <= r[pairs[1]], pairs[1], pairs[0])
    edges = np.unique(np.stack([inner, outer]), axis=1)
    edges = edges[:, edges[0] != edges[1]]
    n = len(xyz)
    y, y_pid, signal = edge_truth(edges, record.particle_id.numpy(), record.track_edges.numpy(),
                                  record.signal_hit.numpy(), n)
    data = Data(x=record.x.float(), edge_index=torch.from_numpy(edges), y=torch.from_numpy(y),
                y_pid=torch.from_numpy(y_pid), signal=torch.from_numpy(signal))
    data.num_nodes = n
    return data


def load_graphs(args) -> tuple[list, str]:
    from trkx.data.listing import record_paths
    from trkx.gnn.records import GraphRecordDataset
    if args.events:
        dataset = GraphRecordDataset(record_paths(args.events))
        return [dataset[i] for i in range(len(dataset))], f"filter-stage records {args.events}"
    from trkx.cli import main as trkx_main
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.data.listing import event_prefixes
    with tempfile.TemporaryDirectory() as scratch:
        trkx_main(["simulate", "--out", scratch, "--n-events", str(args.n_events), "--seed", "41",
                   "--pileup", str(args.pileup), "--first-event-id", "700000"])
        detector = load_detector()
        graphs = [standin_graph(event_record(p, detector, False, 1.0), args.knn)
                  for p in event_prefixes(scratch)]
    return graphs, (f"stand-in: simulated MU={args.pileup:g} events, truth edges + {args.knn} "
                    "nearest hits in space")


def target_sets(data, size: int, count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    degree = torch.bincount(data.edge_index.flatten(), minlength=data.num_nodes)
    connected = torch.nonzero(degree > 0).flatten()
    return [connected[torch.randperm(connected.numel(), generator=generator)[:size]]
            for _ in range(count)]


def throughput(data, config: SamplingConfig, count: int, baseline_count: int) -> dict:
    """Subgraphs per second of each sampler on ``data`` (best of 2 rounds)."""
    from torch_geometric.data import Data
    from torch_geometric.utils import k_hop_subgraph, to_undirected
    targets = target_sets(data, config.targets_per_batch, count, seed=0)
    adjacency = symmetric_adjacency(data.edge_index, data.num_nodes)
    incidence = source_incidence_transposed(data.edge_index, data.num_nodes)
    start = time.perf_counter()
    neighbours = neighbour_lists(data.edge_index, data.num_nodes)
    lists_seconds = time.perf_counter() - start
    undirected = to_undirected(data.edge_index, num_nodes=data.num_nodes)

    def bulk(k: int):
        def run() -> int:
            generator = torch.Generator().manual_seed(0)
            for i in range(0, count, k):
                sample_subgraphs(data, targets[i:i + k], config.hops, config.fanout, generator,
                                 adjacency, incidence, max_nodes=config.max_nodes)
            return count
        return run

    def record(nodes: torch.Tensor, edge_ids: torch.Tensor, targets: torch.Tensor) -> Data:
        """The same minibatch record the bulk sampler yields (relabelled, features, labels)."""
        position = torch.full((data.num_nodes,), -1, dtype=torch.long)
        position[nodes] = torch.arange(nodes.numel())
        is_target = torch.zeros(data.num_nodes, dtype=torch.bool)
        is_target[targets] = True
        edges = data.edge_index[:, edge_ids]
        return Data(x=data.x[nodes], edge_index=position[edges], y=data.y[edge_ids],
                    y_pid=data.y_pid[edge_ids], signal=data.signal[edge_ids], node_ids=nodes,
                    edge_ids=edge_ids, target_edge_mask=is_target[edges].any(0))

    def bfs() -> int:
        rng = random.Random(0)
        for t in targets[:baseline_count]:
            nodes, edge_ids, _ = bfs_subgraph(neighbours, data.edge_index, t.tolist(),
                                              config.hops, config.fanout, config.max_nodes, rng)
            record(nodes, edge_ids, t)
        return baseline_count

    def khop() -> int:
        for t in targets[:baseline_count]:
            subset, _, _, _ = k_hop_subgraph(t, config.hops, undirected,
                                             num_nodes=data.num_nodes)
            inside = torch.zeros(data.num_nodes, dtype=torch.bool)
            inside[subset] = True
            edge_ids = torch.nonzero(inside[data.edge_index[0]]
                                     & inside[data.edge_index[1]]).flatten()
            record(torch.sort(subset).values, edge_ids, t)
        return baseline_count

    rates = {}
    samplers = [("bulk_k1", bulk(1)), ("bulk_k8", bulk(8)), ("bulk_k64", bulk(64)),
                ("bfs_loop", bfs)]
    exact = not config.fanout and config.max_nodes is None
    if exact:       # PyG's k_hop_subgraph has no fan-out or cap
        samplers.append(("k_hop_subgraph_loop", khop))
    for name, fn in samplers:
        n, best = harness.best_of(fn, 2)
        rates[name] = n / best
    sizes = sample_subgraphs(data, targets[:8], config.hops, config.fanout,
                             torch.Generator().manual_seed(0), max_nodes=config.max_nodes)
    return {"subgraphs_per_s": rates,
            "ratio_over_bfs_loop": {k: v / rates["bfs_loop"] for k, v in rates.items()},
            "ratio_over_bulk_k1": {k: v / rates["bulk_k1"] for k, v in rates.items()},
            "bfs_adjacency_lists_seconds": lists_seconds,
            "mean_subgraph_nodes": float(np.mean([s.num_nodes for s in sizes])),
            "mean_subgraph_edges": float(np.mean([s.edge_index.shape[1] for s in sizes])),
            "event_nodes": int(data.num_nodes), "event_edges": int(data.edge_index.shape[1])}


def step_memory(module: GNNModule, data) -> float:
    """Bytes of one training step: CUDA peak allocation, or bytes saved for backward (CPU)."""
    if data.x.is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        module.training_step(data, 0).backward()
        module.zero_grad(set_to_none=True)
        return float(torch.cuda.max_memory_allocated() - before)
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[(t.untyped_storage().data_ptr(), t.numel())] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = module.training_step(data, 0)
    loss.backward()
    module.zero_grad(set_to_none=True)
    return float(sum(seen.values()))


def validate(module: GNNModule, graphs: list) -> tuple[float, float, float]:
    """Validation signal-edge efficiency and purity at the module's cut, and edge AUC."""
    with torch.no_grad():
        scores = torch.cat([torch.sigmoid(module(g).float()) for g in graphs])
    y = torch.cat([g.y for g in graphs])
    signal = torch.cat([g.signal for g in graphs])
    metrics = edge_metrics(scores, y, signal, torch.ones_like(scores), module.edge_cut)
    return metrics.efficiency, metrics.purity, metrics.auc


def train_for(module: GNNModule, batches, budget_s: float, eval_every_s: float,
              val: list) -> list[dict]:
    """Train until ``budget_s`` seconds of training (validation off the clock); the curve."""
    optimizer = torch.optim.AdamW(module.parameters(), lr=module.learning_rate)
    clock, steps, next_eval = 0.0, 0, 0.0
    curve = []
    while True:
        if clock >= next_eval or clock >= budget_s:
            efficiency, purity, auc = validate(module, val)
            curve.append({"train_seconds": clock, "steps": steps, "val_efficiency": efficiency,
                          "val_purity": purity, "val_auc": auc})
            next_eval = clock + eval_every_s
            if clock >= budget_s:
                return curve
        data = next(batches)
        start = time.perf_counter()
        optimizer.zero_grad()
        module.training_step(data, steps).backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        clock += time.perf_counter() - start
        steps += 1


def forever(make_iterable):
    while True:
        yield from make_iterable()


def time_to_quality(graphs: list, val: list, config: SamplingConfig, args,
                    recompute_full: bool = False) -> dict:
    """The full-graph and the minibatch run for the same wall-clock budget each; with
    ``recompute_full`` the full-graph run recomputes each GNN iteration in its backward pass
    (``checkpoint_iterations``: what fits a whole event into this machine's memory)."""
    def fresh(recompute: bool = False) -> GNNModule:
        torch.manual_seed(0)
        model = InteractionGNN(graphs[0].x.shape[1], hidden=args.hidden,
                               n_graph_iters=args.iters, checkpoint_iterations=recompute)
        return GNNModule(model, graph_ops="csr", learning_rate=args.lr)

    full = train_for(fresh(recompute_full), forever(lambda: iter(graphs)), args.budget_s,
                     args.eval_every_s, val)
    dataset = SampledMinibatches(graphs, config, seed=0, rank=0, world_size=1)
    mini = train_for(fresh(), forever(lambda: iter(dataset)), args.budget_s,
                     args.eval_every_s, val)
    goal = full[-1]        # the full-graph run's final edge AUC (defined at every point,
    reached = [p["train_seconds"] for p in mini          # where efficiency and purity at a
               if p["val_auc"] >= goal["val_auc"]]       # fixed cut are 0 and NaN early on)
    return {"fullgraph_curve": full, "minibatch_curve": mini,
            "time_to_quality_ratio": (reached[0] / goal["train_seconds"] if reached else None)}


def plot(result: dict, path: Path) -> None:
    fig, axes = harness.pyplot().subplots(1, 3, figsize=(14, 4))
    for name, style in [("fullgraph", "-o"), ("minibatch", "-s")]:
        curve = result[f"{name}_curve"]
        seconds = [p["train_seconds"] for p in curve]
        for ax, key in zip(axes, ["val_auc", "val_efficiency", "val_purity"]):
            ax.plot(seconds, [p[key] for p in curve], style, label=name, markersize=3)
            ax.set_xlabel("training wall time [s]")
            ax.set_ylabel(key.replace("_", " "))
    axes[0].legend()
    harness.save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore", message=".*self.log.*")  # GNNModule outside a Trainer
    parser = harness.parser(__doc__, events="folder of filter-stage records (*.pt)",
                            n_events=4, quick="tiny events and budget", plot=True)
    parser.set_defaults(threads=2)
    parser.add_argument("--pileup", type=float, default=200.0)
    parser.add_argument("--knn", type=int, default=6)
    parser.add_argument("--targets-per-batch", type=int, default=1024)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--fanout", type=int, nargs="*", default=None)
    parser.add_argument("--max-nodes", type=int, default=None,
                        help="cap on the hits of a minibatch (SamplingConfig.max_nodes)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--iters", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--budget-s", type=float, default=1200.0,
                        help="training wall seconds of each run (default 20 minutes)")
    parser.add_argument("--eval-every-s", type=float, default=60.0)
    parser.add_argument("--minibatches", type=int, default=128,
                        help="subgraphs sampled per throughput round of the bulk sampler")
    parser.add_argument("--baseline-minibatches", type=int, default=16)
    args = harness.parse(parser, argv)
    if args.quick:
        args.n_events, args.pileup, args.targets_per_batch = 3, 5.0, 64
        args.hidden, args.iters, args.budget_s, args.eval_every_s = 16, 2, 6.0, 2.0
        args.minibatches, args.baseline_minibatches = 64, 8
    config = SamplingConfig(targets_per_batch=args.targets_per_batch, hops=args.hops,
                            fanout=args.fanout, bulk=8, max_nodes=args.max_nodes)
    graphs, source = load_graphs(args)
    train, val = graphs[:-1], graphs[-1:]
    print(f"{source}: {len(train)} training + 1 validation events, "
          f"{np.mean([g.num_nodes for g in graphs]):,.0f} hits, "
          f"{np.mean([g.edge_index.shape[1] for g in graphs]):,.0f} edges per event")
    speed = throughput(train[0], config, args.minibatches, args.baseline_minibatches)
    print("subgraphs/s: " + ", ".join(f"{k} {v:.1f}" for k, v in speed["subgraphs_per_s"].items()))
    torch.manual_seed(0)
    module = GNNModule(InteractionGNN(train[0].x.shape[1], hidden=args.hidden,
                                      n_graph_iters=args.iters), graph_ops="csr")
    minibatch = next(iter(SampledMinibatches(train, config, seed=0, rank=0, world_size=1)))
    memory = {"minibatch_step_bytes": step_memory(module, minibatch),
              "fullgraph_step_bytes": step_memory(module, train[0])}
    print("step memory MiB: " + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in memory.items()))
    # a whole event's step holds ~1.5x the bytes autograd saves (measured: 16.7 GB saved, 24 GB
    # resident when the kernel killed it on a 24 GB machine): past the memory free now, the
    # full-graph run recomputes its iterations instead of taking the machine down
    free = harness.available_bytes()
    if free is not None:                 # what this process holds (the step measured) is its
        free += harness.rss_kib() * 1024     # to reuse
    recompute = (not train[0].x.is_cuda and free is not None
                 and 1.5 * memory["fullgraph_step_bytes"] > free)
    if recompute:
        print(f"a whole event's step saves {memory['fullgraph_step_bytes'] / 2**30:.1f} GiB "
              f"of the {free / 2**30:.1f} GiB this process can have: the full-graph run "
              "recomputes its iterations in the backward pass (checkpoint_iterations)")
    quality = time_to_quality(train, val, config, args, recompute_full=recompute)
    result = {
        "bulk_speedup_k64": speed["ratio_over_bfs_loop"]["bulk_k64"],
        "bulk_k64_over_k1": speed["ratio_over_bulk_k1"]["bulk_k64"],
        "time_to_quality_ratio": quality["time_to_quality_ratio"],
        "peak_memory_ratio": memory["minibatch_step_bytes"] / memory["fullgraph_step_bytes"],
        **{f"final_val_{figure}_{run}": quality[f"{run}_curve"][-1][f"val_{figure}"]
           for figure in ("efficiency", "purity", "auc") for run in ("minibatch", "fullgraph")},
        "time_to_quality_figure": "validation edge AUC",
        "fullgraph_checkpoint_iterations": recompute,
        "peak_memory_method": ("cuda max_memory_allocated" if train[0].x.is_cuda else
                               "bytes saved by autograd for backward (CPU)"),
        "throughput": speed, "memory": memory, **quality, "graph_source": source,
        "sampling": {"targets_per_batch": config.targets_per_batch, "hops": config.hops,
                     "fanout": config.fanout, "bulk": config.bulk,
                     "max_nodes": config.max_nodes},
        "model": {"hidden": args.hidden, "n_graph_iters": args.iters, "lr": args.lr},
        "budget_s": args.budget_s, "threads": args.threads, "quick": args.quick,
    }
    for key in ("bulk_speedup_k64", "bulk_k64_over_k1", "peak_memory_ratio",
                "final_val_efficiency_minibatch", "final_val_efficiency_fullgraph",
                "time_to_quality_ratio"):
        print(f"{key}: {result[key]}")
    harness.write_json(args.json, result)
    if args.plot:
        plot(quality, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
