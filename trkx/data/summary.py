"""A compact summary of one event: counts, noise fraction and hits per detector volume."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: TrackML volume ids and what they are.
VOLUME_NAMES: dict[int, str] = {
    7: "pixel endcap (-z)", 8: "pixel barrel", 9: "pixel endcap (+z)",
    12: "short-strip endcap (-z)", 13: "short-strip barrel", 14: "short-strip endcap (+z)",
    16: "long-strip endcap (-z)", 17: "long-strip barrel", 18: "long-strip endcap (+z)",
}


@dataclass
class EventSummary:
    event_id: int
    n_hits: int
    hits_per_volume: dict[int, int]
    n_cells: int | None = None
    n_hits_with_cells: int | None = None
    n_particles: int | None = None
    n_particles_with_hits: int | None = None
    n_particles_pt1: int | None = None
    noise_fraction: float | None = None
    truth_weight_sum: float | None = None
    extra: dict[str, float] = field(default_factory=dict)


def event_summary(event_id: int, hits: pd.DataFrame, cells: pd.DataFrame | None = None,
                  particles: pd.DataFrame | None = None, truth: pd.DataFrame | None = None,
                  ) -> EventSummary:
    """Counts of one event; parts that are absent leave their fields ``None``."""
    per_volume = hits["volume_id"].value_counts().sort_index()
    summary = EventSummary(event_id=event_id, n_hits=len(hits),
                           hits_per_volume={int(k): int(v) for k, v in per_volume.items()})
    if cells is not None:
        summary.n_cells = len(cells)
        summary.n_hits_with_cells = int(cells["hit_id"].nunique())
    if particles is not None:
        summary.n_particles = len(particles)
        summary.n_particles_with_hits = int((particles["nhits"] > 0).sum())
        pt = np.hypot(particles["px"].to_numpy(np.float64), particles["py"].to_numpy(np.float64))
        summary.n_particles_pt1 = int((pt > 1.0).sum())
    if truth is not None:
        summary.noise_fraction = float((truth["particle_id"] == 0).mean()) if len(truth) else 0.0
        summary.truth_weight_sum = float(truth["weight"].to_numpy(np.float64).sum())
    return summary


def format_summary(summary: EventSummary) -> str:
    """A human-readable multi-line text of an :class:`EventSummary`."""
    lines = [f"event {summary.event_id}", f"  hits                {summary.n_hits:>9,d}"]
    if summary.n_cells is not None:
        lines.append(f"  cells               {summary.n_cells:>9,d}  "
                     f"({summary.n_hits_with_cells:,d} hits with cells)")
    if summary.n_particles is not None:
        lines.append(f"  particles           {summary.n_particles:>9,d}  "
                     f"({summary.n_particles_with_hits:,d} with hits, "
                     f"{summary.n_particles_pt1:,d} with pT > 1 GeV)")
    if summary.noise_fraction is not None:
        lines.append(f"  noise fraction      {summary.noise_fraction:>9.2%}")
        lines.append(f"  truth weight sum    {summary.truth_weight_sum:>9.6f}")
    lines.append("  hits per volume")
    for volume, count in summary.hits_per_volume.items():
        share = count / summary.n_hits if summary.n_hits else 0.0
        name = VOLUME_NAMES.get(volume, "unknown volume")
        lines.append(f"    {volume:>3d}  {name:<24s} {count:>8,d}  {share:6.1%}")
    return "\n".join(lines)
