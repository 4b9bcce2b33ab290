"""The final table of `trkx run`: edge figures per stage, track figures, time per stage."""

from __future__ import annotations

import json
from pathlib import Path

from trkx.data.truth import SignalCuts


def load_metrics(evaluate_dir: Path) -> dict:
    """``metrics.json`` written by `trkx evaluate`."""
    return json.loads((evaluate_dir / "metrics.json").read_text())


def _number(value: float | None) -> str:
    """Four decimals, or n/a when a rate has an empty denominator."""
    return "n/a" if value is None else f"{value:.4f}"


def format_run_summary(metrics: dict, seconds: dict[str, float]) -> str:
    """A plain-text table of a pipeline run (what a physicist reads first)."""
    lines = ["", "edges (test events)          efficiency   purity      kept   findable: "
                 "prompt / secondary"]
    for name, stage in metrics.get("edges", {}).items():
        pooled = stage.get("overall")
        if pooled:
            label = "gnn" if name == "events" else name
            line = (f"  {label:<26s} {_number(pooled.get('efficiency')):>10s} "
                    f"{_number(pooled.get('purity')):>8s} {pooled.get('n_kept', 0):>9,d}")
            if "findable_prompt" in pooled:      # records with production radii
                line += (f"   {_number(pooled['findable_prompt'])} / "
                         f"{_number(pooled['findable_secondary'])}")
            lines.append(line)
    overall = metrics["overall"]
    cuts = metrics.get("cuts", {})
    lines += ["", f"tracks ({cuts.get('matching', 'double_majority')} matching, "
                  f"pT >= {cuts.get('pt_min', SignalCuts.pt_min)} GeV)"]
    for key, label in [("efficiency", "efficiency"), ("fake_rate", "fake rate"),
                       ("duplicate_rate", "duplicate rate"), ("trackml_score", "TrackML score")]:
        value = overall.get(key)
        error = overall.get(f"{key}_err")
        text = _number(value)
        if error is not None:
            text += f" ± {error:.4f}"
        lines.append(f"  {label:<26s} {text}")
    lines.append(f"  {'signal particles':<26s} {overall.get('n_signal_particles', 0):,d}")
    lines.append(f"  {'tracks':<26s} {overall.get('n_tracks', 0):,d}")
    lines += ["", "time per stage"]
    for stage, value in seconds.items():
        lines.append(f"  {stage:<26s} {value:>8.1f} s")
    lines.append(f"  {'total':<26s} {sum(seconds.values()):>8.1f} s")
    return "\n".join(lines)
