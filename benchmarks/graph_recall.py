"""Edge efficiency of a candidate graph as a function of particle pT and eta.

A truth-graph edge (i, j) is *found* when the candidate graph holds {i, j} in either direction;
its pT and eta are those of the particle of hit i. Efficiency in a bin = found / truth edges.
"""

from __future__ import annotations

import numpy as np
from torch_geometric.data import Data

from trkx.data.truth import edge_truth


def truth_edges_found(record: Data, edge_index) -> np.ndarray:
    """Per truth-graph edge of ``record``: is it in ``edge_index`` (either direction)?"""
    n = int(record.num_nodes)
    candidates = np.asarray(edge_index.cpu().numpy() if hasattr(edge_index, "cpu") else
                            edge_index)
    truth = record.track_edges.numpy()
    found, _, _ = edge_truth(truth, record.particle_id.numpy(), candidates,
                             np.zeros(n, bool), n)
    return found


def binned_efficiency(values: np.ndarray, found: np.ndarray, edges: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(efficiency, binomial error, count) per bin of ``values``."""
    which = np.digitize(values, edges) - 1
    inside = (which >= 0) & (which < len(edges) - 1)
    total = np.bincount(which[inside], minlength=len(edges) - 1).astype(float)
    hit = np.bincount(which[inside], weights=found[inside].astype(float),
                      minlength=len(edges) - 1)
    eff = np.divide(hit, total, out=np.full_like(total, np.nan), where=total > 0)
    err = np.sqrt(np.divide(eff * (1 - eff), total, out=np.zeros_like(total),
                            where=total > 0))
    return eff, err, total


def plot_efficiency(pt: np.ndarray, eta: np.ndarray, found: np.ndarray, signal: np.ndarray,
                    out_dir, stage: str) -> list:
    """Write ``{stage}_efficiency_pt.png`` (all truth edges) and ``..._eta.png`` (signal)."""
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    specs = [("pt", pt, np.geomspace(0.1, 20, 21), np.ones_like(found, bool),
              "particle pT [GeV]", True),
             ("eta", eta, np.linspace(-4, 4, 33), signal, "particle eta (signal edges)", False)]
    for name, values, bins, mask, xlabel, logx in specs:
        eff, err, _ = binned_efficiency(values[mask], found[mask], bins)
        centres = np.sqrt(bins[1:] * bins[:-1]) if logx else 0.5 * (bins[1:] + bins[:-1])
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.errorbar(centres, eff, yerr=err, fmt="o", ms=3)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("truth edge efficiency")
        ax.set_title(f"{stage} stage")
        if logx:
            ax.set_xscale("log")
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_ylim(min(0.8, np.nanmin(eff) - 0.02) if np.isfinite(eff).any() else 0, 1.01)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"{stage}_efficiency_{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
