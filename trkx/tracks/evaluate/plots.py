"""Matplotlib figures of the tracking performance (one function per figure, no file I/O).

Each function returns a ``matplotlib.figure.Figure``; the CLI saves them. Rates are drawn as
points at the bin centre with horizontal bars over the bin and vertical Clopper-Pearson 68%
intervals (:mod:`trkx.tracks.evaluate.binned`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from trkx.tracks.evaluate.binned import BinnedRate


def _rate_axes(figure: Figure, binned: BinnedRate, xlabel: str, ylabel: str, title: str,
               log_x: bool = False, label: str | None = None):
    axes = figure.add_subplot(1, 1, 1)
    edges = binned.edges
    centre = np.sqrt(edges[:-1] * edges[1:]) if log_x else 0.5 * (edges[:-1] + edges[1:])
    rate = binned.rate
    low, high = binned.interval()
    filled = binned.total > 0
    axes.errorbar(centre[filled], rate[filled],
                  xerr=[(centre - edges[:-1])[filled], (edges[1:] - centre)[filled]],
                  yerr=[(rate - low)[filled], (high - rate)[filled]],
                  fmt="o", markersize=4, capsize=2, label=label)
    if log_x:
        axes.set_xscale("log")
    axes.set_xlim(edges[0], edges[-1])
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    return axes


def rate_figure(binned: BinnedRate, xlabel: str, ylabel: str, title: str, *,
                log_x: bool = False, ylim: tuple[float, float] | None = (0.0, 1.05),
                note: str | None = None) -> Figure:
    """One binned rate with its intervals; ``note`` goes in the lower right corner."""
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axes = _rate_axes(figure, binned, xlabel, ylabel, title, log_x=log_x)
    if ylim is not None:
        axes.set_ylim(*ylim)
    else:
        top = np.nanmax(binned.interval()[1]) if (binned.total > 0).any() else 1.0
        axes.set_ylim(0.0, max(0.05, 1.15 * top))
    if note:
        axes.text(0.98, 0.03, note, transform=axes.transAxes, ha="right", va="bottom",
                  fontsize=8, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.8"})
    return figure


def track_length_figure(tracks: pd.DataFrame, particles: pd.DataFrame) -> Figure:
    """Hits per candidate track (matched and fake stacked) and hits per signal particle."""
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    n_hits = tracks["n_hits"].to_numpy()
    matched = tracks["matched"].to_numpy(bool)
    signal_hits = particles.loc[particles["signal"].to_numpy(bool), "nhits"].to_numpy()
    top = int(max(n_hits.max(initial=1), signal_hits.max(initial=1), 20))
    bins = np.arange(0.5, top + 1.5)
    axes.hist([n_hits[matched], n_hits[~matched]], bins=bins, stacked=True,
              label=["matched tracks", "fake tracks"], color=["tab:blue", "tab:red"],
              alpha=0.8)
    axes.hist(signal_hits, bins=bins, histtype="step", color="black", linewidth=1.5,
              label="signal particles (true hits)")
    axes.set_xlabel("hits per track (or per particle)")
    axes.set_ylabel("tracks (or particles) per bin of 1 hit")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title("Track length")
    axes.legend(fontsize=8)
    axes.grid(True, alpha=0.3)
    return figure


def resolution_figure(rows: pd.DataFrame) -> Figure:
    """Fitted pT over true pT of matched signal tracks (trkx.tracks.evaluate.resolution): the median
    and the 16-84% band of ``pT_fit / pT_true - 1`` in bins of true pT, |eta| < 2 and above."""
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    edges = np.array([1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0])
    centre = np.sqrt(edges[:-1] * edges[1:])
    for label, central in (("|eta| < 2", True), ("|eta| >= 2", False)):
        part = rows[(np.abs(rows["eta"].to_numpy()) < 2.0) == central]
        ratio = (part["pt_fit"] / part["pt"] - 1).to_numpy(np.float64)
        which = np.digitize(part["pt"].to_numpy(np.float64), edges) - 1
        stats = [np.nanpercentile(ratio[which == b], [16, 50, 84]) if (which == b).sum() >= 5
                 else [np.nan] * 3 for b in range(len(centre))]
        low, mid, high = np.asarray(stats, dtype=np.float64).T
        shown = np.isfinite(mid)
        axes.errorbar((centre * (1.0 if central else 1.05))[shown], mid[shown],
                      yerr=[(mid - low)[shown], (high - mid)[shown]],
                      fmt="o", markersize=4, capsize=2, label=f"{label} (bins of >= 5)")
    axes.axhline(0.0, color="0.5", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_xlim(edges[0], edges[-1])
    axes.set_xlabel(r"particle $p_T$ [GeV]")
    axes.set_ylabel(r"$p_T^{fit} / p_T^{true} - 1$ (median, 16-84%)")
    axes.set_title(r"Track $p_T$ resolution (matched signal tracks)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    return figure
