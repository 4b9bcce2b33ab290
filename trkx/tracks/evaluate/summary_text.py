"""The lines that print a summary's splits (trkx.tracks.evaluate.metrics): by vertex |z| along the
beam,
the short particles, and the anchors' own figures (trkx.tracks.evaluate.anchors). Shared by
``trkx evaluate`` and ``trkx infer``'s pixel-truth line."""

from __future__ import annotations

from trkx.tracks.evaluate.metrics import FEW_LAYERS, SHORT_HITS, VERTEX_Z_BINS

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


def short_particles_line(summary: dict, hits: str = "hits") -> str | None:
    """``prompt particles within 100 mm by hits: 3 E (N; K on <= 2 layers: E'), 4 ...,
    5+ ...`` (``hits`` names what was counted, e.g. ``pixel hits``); None without them."""
    if f"efficiency_prompt_near_hits_{SHORT_HITS[0][0]}" not in summary:
        return None
    key = "prompt_near_hits_"
    cells = []
    for name, _, _ in SHORT_HITS:
        cell = (f"{name.replace('up', '+')} {rate_text(summary[f'efficiency_{key}{name}'])} "
                f"({summary[f'n_signal_{key}{name}']}")
        few = summary.get(f"n_signal_{key}{name}_few_layers")
        if few:
            cell += (f"; {few} on <= {FEW_LAYERS} layers: "
                     f"{rate_text(summary[f'efficiency_{key}{name}_few_layers'])}")
        cells.append(cell + ")")
    return f"prompt particles from |z| < 100 mm by {hits}: " + ", ".join(cells)


def _origin_text(summary: dict) -> str:
    """`` (prompt E of N, secondary E of N)`` when the summary splits by origin."""
    if "efficiency_prompt" not in summary:
        return ""
    return (f" (prompt {rate_text(summary['efficiency_prompt'])} of "
            f"{summary['n_signal_prompt']}, secondary "
            f"{rate_text(summary['efficiency_secondary'])} of {summary['n_signal_secondary']})")


#: The indentation of the anchors' splits under their line (the callers indent the line by 2).
SPLIT_INDENT = "    "


def anchor_line(summary: dict) -> str:
    """The anchors' efficiency and fake rate on their own definitions
    (trkx.tracks.evaluate.anchors), and where the summary has them, the same splits as trkx's
    own figures on those definitions: prompt and secondary, by vertex |z|, and the prompt
    particles from |z| < 100 mm by their pixel hits (lines below the first, indented by
    :data:`SPLIT_INDENT` beyond it where the caller indents the first by two spaces)."""
    line = (f"anchors' definitions (HEPTv2: pixel part, pT > 0.9 GeV, |eta| < 4, >= 3 pixel "
            f"layers; fakes over signal-majority candidates): efficiency "
            f"{rate_text(summary['efficiency'])} of {summary['n_signal_particles']}"
            f"{_origin_text(summary)}, fake rate "
            f"{rate_text(summary['fake_rate_signal_majority'])}")
    splits = [split for split in (vertex_z_line(summary),
                                  short_particles_line(summary, hits="pixel hits"))
              if split is not None]
    return "\n".join([line] + [SPLIT_INDENT + split for split in splits])


# trkx.tracks.evaluate.metrics.FAKE_KINDS as printed
FAKE_KIND_NAMES: dict[str, str] = {"piece_signal": "pieces of signal particles",
                                   "piece_other": "pieces of other particles",
                                   "mixed": "mixed", "noise": "noise"}


def _rate(value) -> str:
    return "    n/a" if value is None or value != value else f"{value:>7.4f}"


def format_stage_edges(name: str, pooled: dict) -> str:
    """One line of a stage's pooled edge figures; with production radii, each population's
    edge efficiency and findable share (trkx.tracks.evaluate.edge_metrics)."""
    line = (f"  edges [{name}] efficiency {pooled['efficiency']:.4f}, purity "
            f"{pooled['purity']:.4f} ({pooled['n_kept']:,d} of {pooled['n_edges']:,d} edges kept)")
    if "findable_prompt" in pooled:
        line += (f"\n    prompt: edges {_rate(pooled['efficiency_prompt']).strip()}, findable "
                 f"{_rate(pooled['findable_prompt']).strip()};  secondary: edges "
                 f"{_rate(pooled['efficiency_secondary']).strip()}, findable "
                 f"{_rate(pooled['findable_secondary']).strip()}")
    return line


def format_table(overall: dict, events: list[dict]) -> str:
    """The short summary of an evaluation: headline figures, then one row per event."""
    def pct(name: str) -> str:
        value, err = overall[name], overall[f"{name}_err"]
        if value is None or value != value:
            return "n/a"
        return f"{100 * value:6.2f} +- {100 * err:.2f} %"
    header = (f"events {overall['n_events']}, hits {overall['n_hits']:,d}, signal particles "
              f"{overall['n_signal_particles']:,d}, tracks {overall['n_tracks']:,d}")
    lines = [header,
             f"  efficiency       {pct('efficiency')}"]
    if overall.get("efficiency_prompt") is not None:
        lines += [f"    prompt         {pct('efficiency_prompt')}  "
                  f"({overall['n_signal_prompt']:,d} particles, production radius <= 1 mm)",
                  f"    secondary      {pct('efficiency_secondary')}  "
                  f"({overall['n_signal_secondary']:,d})"]
    lines += [f"  fake rate        {pct('fake_rate')}"]
    kinds = {kind: overall.get(f"fake_rate_{kind}") for kind in FAKE_KIND_NAMES}
    if all(value is not None and value == value for value in kinds.values()):
        lines.append("    " + ", ".join(f"{name} {100 * kinds[kind]:.2f} %"
                                          for kind, name in FAKE_KIND_NAMES.items()))
    lines += [f"  duplicate rate   {pct('duplicate_rate')}",
              f"  TrackML score    {overall['trackml_score']:.4f}"]
    if len(events) > 1:
        lines.append(f"  {'event':>10s} {'eff':>7s} {'prompt':>7s} {'second':>7s} {'fake':>7s} "
                     f"{'dup':>7s} {'score':>7s}")
        for e in events:
            lines.append(f"  {e['event_id']:>10d} {_rate(e['efficiency'])} "
                         f"{_rate(e.get('efficiency_prompt'))} "
                         f"{_rate(e.get('efficiency_secondary'))} "
                         f"{_rate(e['fake_rate'])} {_rate(e['duplicate_rate'])} "
                         f"{_rate(e['trackml_score'])}")
    return "\n".join(lines)


def evaluation_text(report: dict) -> str:
    """Everything ``trkx evaluate`` prints of a report (``metrics.json``): the table, the
    splits, the anchors' count, the resolution and the edge figures per stage."""
    from trkx.tracks.evaluate.report import json_safe
    from trkx.tracks.evaluate.resolution import format_resolution

    overall = json_safe(report["overall"])
    lines = [format_table(overall, json_safe(report["events"]))]
    lines += ["  " + line for line in (vertex_z_line(overall), short_particles_line(overall),
                                       anchor_line(report["anchors"]["overall"]))
              if line is not None]
    if report.get("resolution") is not None:
        lines.append(format_resolution(report["resolution"]))
    lines += [format_stage_edges(name, stage["overall"])
              for name, stage in report["edges"].items() if stage["overall"]]
    return "\n".join(lines)


def pixel_truth_text(report: dict, n_events: int, path) -> str:
    """What ``trkx infer`` prints of the events with pixel truth (trkx.tracks.evaluate.projection's
    ``pixel_truth_report``, written to ``path``)."""
    err = report.get("efficiency_err") or 0.0
    lines = [f"pixel truth ({n_events} event(s), tracks projected onto the hits with truth): "
             f"efficiency {report['efficiency']:.3f} +- {err:.3f} of "
             f"{report['n_signal_particles']} signal particles{_origin_text(report)}, fake rate "
             f"{report['fake_rate'] or 0.0:.3f}, duplicate rate "
             f"{report['duplicate_rate'] or 0.0:.3f} -> {path}"]
    lines += ["  " + line for line in (vertex_z_line(report), short_particles_line(report),
                                       anchor_line(report["anchors"])) if line is not None]
    return "\n".join(lines)
