"""The lines that print a summary's splits (trkx.tracks.metrics): by vertex |z| along the beam,
the short particles, and the anchors' own figures (trkx.tracks.anchors). Shared by
``trkx evaluate`` and ``trkx infer``'s pixel-truth line."""

from __future__ import annotations

from trkx.tracks.metrics import SHORT_HITS, VERTEX_Z_BINS

_BIN_TEXT = {"0_50": "0-50", "50_100": "50-100", "100_150": "100-150", "150_up": ">150"}


def rate_text(value) -> str:
    """A rate to three digits, ``n/a`` for None or NaN."""
    return "n/a" if value is None or value != value else f"{value:.3f}"


def vertex_z_line(summary: dict) -> str | None:
    """``by vertex |z| [mm]: 0-50 E (N), ...`` with the prompt and secondary particles' own
    rates; None when the summary has no vertex z."""
    if f"efficiency_vz_{VERTEX_Z_BINS[0][0]}" not in summary:
        return None
    cells = []
    for name, _, _ in VERTEX_Z_BINS:
        cells.append(f"{_BIN_TEXT[name]} {rate_text(summary[f'efficiency_vz_{name}'])} "
                     f"({summary[f'n_signal_vz_{name}']}; prompt "
                     f"{rate_text(summary[f'efficiency_prompt_vz_{name}'])}, secondary "
                     f"{rate_text(summary[f'efficiency_secondary_vz_{name}'])})")
    return "by vertex |z| [mm]: " + ", ".join(cells)


def short_particles_line(summary: dict) -> str | None:
    """``prompt particles within 100 mm by hits: 3 E (N), 4 ..., 5+ ...``; None without them."""
    if f"efficiency_prompt_near_hits_{SHORT_HITS[0][0]}" not in summary:
        return None
    key = "prompt_near_hits_"
    cells = [f"{name.replace('up', '+')} {rate_text(summary[f'efficiency_{key}{name}'])} "
             f"({summary[f'n_signal_{key}{name}']})" for name, _, _ in SHORT_HITS]
    return "prompt particles from |z| < 100 mm by hits: " + ", ".join(cells)


def anchor_line(summary: dict) -> str:
    """The anchors' efficiency and fake rate on their own definitions (trkx.tracks.anchors)."""
    return (f"anchors' definitions (HEPTv2: pixel part, pT > 0.9 GeV, |eta| < 4, >= 3 pixel "
            f"layers; fakes over signal-majority candidates): efficiency "
            f"{rate_text(summary['efficiency'])} of {summary['n_signal_particles']}, fake rate "
            f"{rate_text(summary['fake_rate_signal_majority'])}")
