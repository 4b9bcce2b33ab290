"""Graphs and the plot of ``benchmarks/distributed.py``: filter-stage records, several of them
side by side (one disconnected graph), the ``--quick`` graph of the sample event, and the
balance/traffic figure."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
PARTITIONERS = ("sector", "balanced", "refined")
DEFAULT = "balanced"

def load_graphs(folder: Path, n_events: int) -> list[dict]:
    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    graphs = []
    for path in record_paths(str(folder))[:n_events]:
        data = load_record(path)
        graphs.append({"name": path.name, "pos": data.pos.float(), "x": data.x.float(),
                       "edge_index": data.edge_index.long(), "y": data.y.float(),
                       "signal": data.signal.bool()})
    if not graphs:
        raise SystemExit(f"{folder}: no event records")
    return graphs


def side_by_side(graphs: list[dict]) -> dict:
    """One graph of all ``graphs`` (node ids of graph i offset by the nodes before it)."""
    offsets = np.cumsum([0] + [g["x"].shape[0] for g in graphs])[:-1]
    return {"name": f"{len(graphs)} events side by side",
            "pos": torch.cat([g["pos"] for g in graphs]), "x": torch.cat([g["x"] for g in graphs]),
            "edge_index": torch.cat([g["edge_index"] + int(o) for g, o in zip(graphs, offsets)],
                                    1),
            "y": torch.cat([g["y"] for g in graphs]),
            "signal": torch.cat([g["signal"] for g in graphs])}


def quick_graph(particles: int = 300) -> dict:
    """``particles`` particles' hits of the sample event with an xyz radius graph (labelled)."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.embedding.graph import build_edges
    from trkx.embedding.labels import label_edges
    data = Path(os.environ.get("TRKX_DATA", REPO.parent / "shared" / "data" / "trackml"))
    record = event_record(str(data / "sample_event" / "event000000001"), load_detector(),
                          use_cells=False, signal_pt_min=1.0)
    pid = record.particle_id.numpy()
    chosen = np.random.default_rng(0).choice(np.unique(pid[pid != 0]), particles, replace=False)
    keep = torch.as_tensor(np.flatnonzero(np.isin(pid, chosen)))
    from torch_geometric.data import Data
    sub = Data(pos=record.pos[keep], x=record.x[keep], particle_id=record.particle_id[keep],
               signal_hit=record.signal_hit[keep])
    sub.num_nodes = keep.numel()
    new = torch.full((int(record.num_nodes),), -1, dtype=torch.int64)
    new[keep] = torch.arange(keep.numel())
    edges = new[record.track_edges]
    sub.track_edges = edges[:, (edges >= 0).all(0)]
    r, phi, z = sub.pos.T
    xyz = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], 1) / 1000.0
    sub.edge_index = build_edges(xyz, 0.1, 8, "kdtree", pos=sub.pos)
    y, _, signal_edges = label_edges(sub, sub.edge_index)
    return {"name": f"quick: {particles} particles of sample event 1, xyz radius graph",
            "pos": sub.pos.float(), "x": sub.x.float(), "edge_index": sub.edge_index.long(),
            "y": y.float(), "signal": signal_edges.bool()}



def plot(result: dict, path: Path) -> None:
    """Edge balance per P and bytes per GNN iteration per P, every partitioner."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = sorted(int(P) for P in result["balance"])
    def mib(name: str, algorithm: str) -> list[float]:
        return [result["balance"][str(P)][name]["bytes"][algorithm]["total"] / 2**20
                for P in sizes]

    for name in PARTITIONERS:
        left.plot(sizes, [result["balance"][str(P)][name]["edge_imbalance"] for P in sizes],
                  "-o", label=name, markersize=3)
        right.plot(sizes, mib(name, "sparse-1d"), "-o", markersize=3, label=f"sparse-1d, {name}")
    right.plot(sizes, mib(DEFAULT, "oblivious-1d"), "k:", label="oblivious-1d (any partition)")
    left.set(xlabel="processes P", ylabel="edges max / mean", title="edge balance")
    right.set(yscale="log", xlabel="processes P",
              ylabel=f"MiB received per GNN iteration (width {result['width']})",
              title="traffic, all ranks")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(P) for P in sizes])
        ax.minorticks_off()
    left.legend()
    right.legend(fontsize=7)
    fig.suptitle(result["graph"]["name"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


