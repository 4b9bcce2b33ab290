"""Working points chosen on validation data: edge cuts, schedules, the track builder's cut."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from trkx.edges.working_point import cut_for_edges_per_hit, cut_for_efficiency
from trkx.stages.schedules import warmup_cosine
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.track_labels import dissolve_short
from trkx.tracks.tune.tuning import tune_cut

from .tracks_events import broken_after_third_hit, noise_free_simulated_record


def test_cut_keeps_exactly_the_target_share_of_signal_edges():
    scores = torch.linspace(0.1, 1.0, 10)
    assert cut_for_efficiency(scores, 0.9) == pytest.approx(0.2)   # drops only 0.1
    assert cut_for_efficiency(scores, 1.0) == pytest.approx(0.1)   # keeps all
    assert cut_for_efficiency(scores, 0.5) == pytest.approx(0.6)   # keeps 0.6 .. 1.0
    shuffled = scores[torch.randperm(10, generator=torch.Generator().manual_seed(0))]
    assert cut_for_efficiency(shuffled, 0.9) == pytest.approx(0.2)


def test_cut_with_ties_never_keeps_fewer_than_the_target():
    scores = torch.tensor([0.3, 0.3, 0.3, 0.9])
    cut = cut_for_efficiency(scores, 0.8)
    assert float((scores >= cut).float().mean()) >= 0.8
    assert cut_for_efficiency(torch.zeros(0), 0.99) == 0.0
    with pytest.raises(ValueError, match="target efficiency"):
        cut_for_efficiency(scores, 0.0)


def test_edges_per_hit_bound_keeps_at_most_the_bound():
    scores = torch.linspace(0.05, 1.0, 20)[torch.randperm(20, generator=torch.Generator()
                                                          .manual_seed(1))]
    cut = cut_for_edges_per_hit(scores, n_hits=4, max_edges_per_hit=1.5)   # at most 6 edges
    assert int((scores >= cut).sum()) == 6
    assert 0.70 < cut <= 0.75 + 1e-12                  # just above the 7th largest (0.70)
    ties = torch.tensor([0.2, 0.5, 0.5, 0.5, 0.9])
    assert int((ties >= cut_for_edges_per_hit(ties, 1, 2.0)).sum()) == 1   # ties drop
    assert cut_for_edges_per_hit(scores, n_hits=20, max_edges_per_hit=1.0) == 0.0
    with pytest.raises(ValueError, match="max_edges_per_hit"):
        cut_for_edges_per_hit(scores, 4, 0.0)


def test_filter_working_point_obeys_the_edge_bound():
    from trkx.data.record_type import Record
    from trkx.filter.model import FilterMLP
    from trkx.filter.module import FilterModule

    torch.manual_seed(0)
    n, e = 50, 400
    record = Record(x=torch.rand(n, 3), pos=torch.rand(n, 3), num_nodes=n,
                  edge_index=torch.randint(0, n, (2, e)), y=torch.rand(e) < 0.3)
    record.y_pid, record.signal = record.y.clone(), record.y.clone()
    for bound, most in ((None, None), (2.0, 100)):
        module = FilterModule(FilterMLP(hit_features=3), target_efficiency=0.99,
                              max_edges_per_hit=bound)
        module.log = lambda *args, **kwargs: None
        module.validation_step(record, 0)
        module.on_validation_epoch_end()
        scores = module.scores(record)
        kept = int((scores >= module.working_point()["score_cut"]).sum())
        signal_kept = float((scores[record.signal] >= module.chosen_cut).float().mean())
        if most is None:
            assert signal_kept >= 0.99 and kept > 100     # an untrained net keeps most edges
        else:
            assert kept <= most and signal_kept < 0.99      # the bound wins


def test_warmup_then_cosine_to_the_floor():
    assert warmup_cosine(0, 10, 110) == pytest.approx(0.1)
    assert warmup_cosine(9, 10, 110) == pytest.approx(1.0)
    assert warmup_cosine(10, 10, 110) == pytest.approx(1.0)
    assert warmup_cosine(60, 10, 110, floor=0.0) == pytest.approx(0.5)
    assert warmup_cosine(110, 10, 110, floor=0.05) == pytest.approx(0.05)
    assert warmup_cosine(500, 10, 110, floor=0.05) == pytest.approx(0.05)
    values = [warmup_cosine(t, 10, 110) for t in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_track_builder_cut_is_chosen_above_the_fake_edges():
    """Fake edges at score 0.45 merge particles in connected components: the tuned cut must
    lie above them and reach the best efficiency of the scan."""
    record = noise_free_simulated_record(seed=3, mu=4.0)
    truth = record.track_edges
    rng = np.random.default_rng(0)
    partner = torch.from_numpy(rng.permutation(truth.shape[1]))
    fakes = torch.stack([truth[0], truth[1][partner]])
    pid = record.particle_id
    fakes = fakes[:, pid[fakes[0]] != pid[fakes[1]]]
    record.edge_index = torch.cat([truth, fakes], dim=1)
    record.scores = torch.cat([torch.ones(truth.shape[1]), torch.full((fakes.shape[1],), 0.45)])
    tuned = tune_cut([record], TrackBuilder(method="components"), fake_target=0.05)
    assert tuned.cut > 0.45
    assert tuned.efficiency == pytest.approx(1.0)
    low = [s for s in tuned.scan if s[0] < 0.45]
    assert low and all(s[2] < 0.5 for s in low)   # merged tracks match nothing
    assert not math.isnan(tuned.fake_rate) and tuned.fake_rate <= 0.05


def test_short_candidates_are_dissolved_and_the_length_is_tuned():
    """Cutting every true track into a long piece and a 3-hit fragment: the fragments are fake
    tracks (they hold under half their particle's hits); min_length 4 dissolves exactly them."""
    record = broken_after_third_hit(noise_free_simulated_record(seed=5, mu=4.0))
    labels = TrackBuilder(method="components", stitch=False).build(record)
    dissolved = dissolve_short(labels, 4)
    _, counts = np.unique(labels, return_counts=True)
    _, new_counts = np.unique(dissolved, return_counts=True)
    assert (new_counts[new_counts > 1] >= 4).all()
    assert (counts >= 4).sum() == (new_counts >= 4).sum()
    tuned = tune_cut([record], TrackBuilder(method="components", stitch=False), fake_target=0.01,
                     cuts=(0.5,), lengths=(3, 4))
    by_length = {length: (eff, fake) for _, length, eff, fake in tuned.scan}
    assert by_length[3][1] > 0.2 and by_length[4][1] == 0.0
    assert by_length[4][0] == pytest.approx(by_length[3][0])
    assert tuned.min_length == 4


def test_a_tuned_tracks_config_gives_back_the_builder_it_was_written_from(tmp_path):
    """trkx.tracks.stage_config: every builder key and each model's file written, the same
    builder read back; a recipe's null walk cut or a cut without its model is refused by name."""
    from trkx.config import ConfigError
    from trkx.tracks.fit.quality import FEATURES, QualityModel
    from trkx.tracks.stage_config import track_builder, write_tuned_config

    model = QualityModel(tuple(range(len(FEATURES))), (1.5,) * len(FEATURES),
                         tuple(-0.25 * i for i in range(len(FEATURES))), 0.75)
    builder = TrackBuilder(walk_cut=0.25, min_length=5, quality_cut=0.4, quality=model,
                           extend_window_xy=2.0, swap_chi2_ratio=2.0)
    written = write_tuned_config(tmp_path, builder, {"metrics": {"pt_min": 1.0}},
                                 {"val_track_efficiency": 0.9}, "a test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quality.json", "tracks.yaml"]
    assert track_builder(written) == builder
    assert track_builder(written, ["builder.walk_cut=0.5"]).walk_cut == 0.5
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("builder:\n  walk_cut: null\n  min_length: 3\n")
    with pytest.raises(ConfigError, match=r"builder\.walk_cut is null: tune the builder"):
        track_builder(recipe)
    recipe.write_text("builder:\n  walk_cut: 0.5\n  min_length: 3\n  quality_cut: 0.2\n")
    with pytest.raises(ConfigError, match=r"quality_cut is set but .*quality names no model"):
        track_builder(recipe)


def test_one_rule_meets_a_config_section_and_a_working_point() -> None:
    """trkx.files.checkpoint.with_working_point: a null value takes the trained stage's, a set
    one stays, a null the working point lacks names the key (unless optional)."""
    from trkx.files.checkpoint import with_working_point

    point = {"radius": 0.18, "max_neighbours": 96.0}
    assert with_working_point({"radius": None, "max_neighbours": 48}, point, "x") == {
        "radius": 0.18, "max_neighbours": 48}
    with pytest.raises(ValueError, match="score_cut is null: set it"):
        with_working_point({"score_cut": None}, point, "set it")
    with pytest.raises(ValueError, match="score_cut is null"):
        with_working_point({"score_cut": None}, None, "set it")
    assert with_working_point({"extra": None}, point, "x", optional=("extra",)) == {
        "extra": None}


def test_the_tuner_counts_the_efficiency_it_is_told_to():
    """``efficiency_count``: the tuned efficiency is that of the chosen point's tracks counted
    on trkx's own signal, or on the anchors' (each track's pixel projection, pT > 0.9 GeV on
    >= 3 pixel layers), and the two counts differ on this event; the fake rate stays trkx's."""
    from dataclasses import replace

    from trkx.tracks.builder.track_labels import tracks_frame
    from trkx.tracks.evaluate.anchors import anchor_evaluation
    from trkx.tracks.evaluate.event_truth import truth_from_record
    from trkx.tracks.evaluate.metrics import evaluate_event

    record = broken_after_third_hit(noise_free_simulated_record(seed=5, mu=4.0))
    builder = TrackBuilder(method="components", stitch=False)
    truth = truth_from_record(record)
    fixed = dict(cuts=(0.5,), lengths=(3, 4), forward_lengths=(), short_scores=(None,),
                 quality_cuts=(None,), short_quality_cuts=(None,), fake_target=1.0)
    figures = {}
    for count, evaluate in (("trkx", lambda frame: evaluate_event(truth, frame)),
                            ("anchors", lambda frame: anchor_evaluation(truth, frame))):
        tuned = tune_cut([record], builder, efficiency_count=count, **fixed)
        labels = replace(builder, cc_cut=tuned.cut, min_length=tuned.min_length).build(record)
        frame = tracks_frame(record.hit_id, labels, 7)
        particles = evaluate(frame).particles
        signal = particles[particles["signal"]]
        assert tuned.efficiency == pytest.approx((signal["n_matched_tracks"] > 0).mean())
        own = evaluate_event(truth, frame).tracks
        assert tuned.fake_rate == pytest.approx(1.0 - own["matched"].mean())
        figures[count] = tuned.efficiency
    assert figures["trkx"] != pytest.approx(figures["anchors"])
    with pytest.raises(ValueError, match="efficiency_count 'heptv2'"):
        tune_cut([record], builder, efficiency_count="heptv2", **fixed)


def test_the_tuning_settings_are_checked_by_name() -> None:
    """trkx.tracks.tune.tune_tracks.TrackTuning refuses an unknown count and too few points."""
    from trkx.tracks.tune.tune_tracks import TrackTuning

    assert TrackTuning(efficiency_count="anchors", tune_points=24).tune_points == 24
    with pytest.raises(ValueError, match="efficiency_count 'heptv2'"):
        TrackTuning(efficiency_count="heptv2")
    with pytest.raises(ValueError, match="tune_points must be >= 2, got 1"):
        TrackTuning(tune_points=1)


def test_training_state_saved_with_the_gnns_old_tuning_keys_resumes() -> None:
    """The track tuning's keys left the GNN's module section for the tracks config; a run saved
    with them resumes under a config without them, and not under another loss weight."""
    import json

    from trkx.training.fit import _same_run

    old = {"model": {"hidden": 8}, "module": {"efficiency_count": "trkx", "tune_points": 8,
                                              "extend_window_xy": 2.0, "fake_weight": 0.2}}
    new = {"model": {"hidden": 8}, "module": {"fake_weight": 0.2}}
    assert _same_run(json.dumps(old), new)
    assert not _same_run(json.dumps(old), {**new, "module": {"fake_weight": 0.1}})


def test_length_figures_count_each_events_particle_once():
    """The efficiency counts the (event, particle) pairs found by the kept candidates: two
    kept pieces of one particle find it once, the same particle id in another event is
    another particle, a dropped candidate finds nothing; the fake rate is over the kept."""
    import pandas as pd

    from trkx.tracks.tune.length_figures import LengthTable, length_figures

    big = 2**60 + 7                              # TrackML particle ids need all 64 bits
    table = pd.DataFrame({
        "track_id": np.arange(6), "n_hits": [6, 7, 6, 3, 8, 9],
        "abs_eta": [0.5, 0.5, 0.5, 0.5, 2.5, 0.5],
        "matched": [True, True, True, True, True, False],
        "signal_pid": [big, big, big, 5, 5, 0], "mean_score": 0.5, "quality": 1.0,
        "event": [0, 0, 1, 1, 1, 1]})
    # central 6, forward 9: the 3-hit and the forward 8-hit candidates of particle 5 dropped
    efficiency, fake = length_figures(table, 4, 6, 9, 2.0)
    assert efficiency == pytest.approx(2 / 4) and fake == pytest.approx(1 / 4)
    # forward 8 keeps event 1's particle 5: three particles found
    assert length_figures(LengthTable.of(table), 4, 6, 8, 2.0) == pytest.approx((3 / 4, 1 / 5))
    # the short one kept by its score alone: the same particle, no new find
    assert length_figures(table, 4, 6, 8, 2.0, short_score=0.4) == pytest.approx((3 / 4, 1 / 6))
