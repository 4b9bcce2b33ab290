"""The final table of `trkx run`: each stage's edge figures, with both populations' findable
shares where the evaluation has them."""

from __future__ import annotations

from trkx.pipeline.summary import format_run_summary


def test_the_run_summary_gives_each_population_its_findable_share() -> None:
    metrics = {
        "edges": {
            "embedding": {"overall": {"efficiency": 0.9878, "purity": 0.0157, "n_kept": 6131643,
                                      "findable_prompt": 0.9942, "findable_secondary": 0.6012}},
            "events": {"overall": {"efficiency": 0.9419, "purity": 0.9401, "n_kept": 419375}},
        },
        "overall": {"efficiency": 0.9132, "efficiency_err": 0.0026, "fake_rate": 0.0231,
                    "n_signal_particles": 12108, "n_tracks": 22716},
        "cuts": {"matching": "double_majority", "pt_min": 1.0},
    }
    lines = format_run_summary(metrics, {"gnn": 3.5}).splitlines()
    embedding = next(line for line in lines if line.strip().startswith("embedding"))
    assert embedding.split()[1:] == ["0.9878", "0.0157", "6,131,643", "0.9942", "/", "0.6012"]
    gnn = next(line for line in lines if line.strip().startswith("gnn "))
    assert gnn.split()[1:] == ["0.9419", "0.9401", "419,375"]     # no radii: no shares
    assert any("0.9132 ± 0.0026" in line for line in lines)
