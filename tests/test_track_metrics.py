"""Matching definitions and tracking metrics on hand-made events."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tests.tracks_events import hand_truth
from trkx.data.record_type import Record
from trkx.tracks.evaluate.binned import binned_rate, standard_rates
from trkx.tracks.evaluate.edge_metrics import edge_metrics, pool_edge_metrics
from trkx.tracks.evaluate.metrics import (
    FAKE_KINDS,
    MetricCuts,
    evaluate_event,
    event_summary,
    overall_summary,
)
from trkx.tracks.evaluate.summary_text import FAKE_KIND_NAMES, format_table


def submission(track_of_hit) -> pd.DataFrame:
    track_of_hit = np.asarray(track_of_hit)
    return pd.DataFrame({"hit_id": np.arange(1, len(track_of_hit) + 1),
                         "track_id": track_of_hit})


def summary(truth, tracks, **cuts):
    return event_summary(evaluate_event(truth, submission(tracks), MetricCuts(**cuts)))


def test_split_track_counted_per_matching_definition():
    truth = hand_truth([5] * 10)
    # 6 + 4: the 6-hit piece holds > 50% of the particle; the 4-hit piece does not.
    split = [1] * 6 + [2] * 4
    dm = summary(truth, split)
    assert (dm["efficiency"], dm["fake_rate"], dm["duplicate_rate"]) == (1.0, 0.5, 0.0)
    atlas = summary(truth, split, matching="atlas")
    assert (atlas["efficiency"], atlas["fake_rate"], atlas["duplicate_rate"]) == (1.0, 0.0, 0.5)
    perfect = summary(truth, split, matching="perfect")
    assert (perfect["efficiency"], perfect["fake_rate"]) == (0.0, 1.0)
    # 5 + 5: neither piece holds more than half: lost under double majority, two fakes.
    halves = summary(truth, [1] * 5 + [2] * 5)
    assert (halves["efficiency"], halves["fake_rate"], halves["n_fake_tracks"]) == (0.0, 1.0, 2)
    assert halves["trackml_score"] == 0.0
    # Pieces shorter than min_track_hits are not tracks at all.
    short = summary(truth, [1] * 8 + [2] * 2)
    assert (short["n_tracks"], short["fake_rate"]) == (1, 0.0)


def test_hand_made_event_metrics_and_score():
    # Particles: A (10 hits, signal), B (5 hits, pT 0.5: not signal), C (3 hits, signal);
    # 4 noise hits. Hits 1-10 A, 11-15 B, 16-18 C, 19-22 noise.
    pid = [1] * 10 + [2] * 5 + [3] * 3 + [0] * 4
    pt = [2.0] * 10 + [0.5] * 5 + [3.0] * 3 + [0.0] * 4
    truth = hand_truth(pid, pt=pt)
    tracks = ([10] * 10          # A complete
              + [20] * 3 + [30, 31]  # 3 of B's hits together, 2 alone
              + [40, 41, 50]     # C split in singletons, one joins the noise track
              + [20, 20, 50, 50])  # 2 noise on B's track, 2 noise with a C hit
    figures = summary(truth, tracks)
    # Signal: A and C. A matched, C not: efficiency 1/2.
    assert figures["n_signal_particles"] == 2
    assert figures["efficiency"] == 0.5
    assert figures["efficiency_err"] == pytest.approx(math.sqrt(0.25 / 2))
    # Tracks >= 3 hits: A's (matched), B's 5-hit track (3/5 of it B, 3/5 of B: matched),
    # the 3-hit noise track (majority noise: fake).
    assert figures["n_tracks"] == 3 and figures["n_fake_tracks"] == 1
    assert figures["fake_rate"] == pytest.approx(1 / 3)
    assert figures["fake_rate_err"] == pytest.approx(math.sqrt((1 / 3) * (2 / 3) / 3))
    assert figures["duplicate_rate"] == 0.0
    # Score: weights 1 on particle hits (18), credited A 10 + B 3.
    assert figures["trackml_score"] == pytest.approx(13 / 18)


def test_fakes_split_by_kind():
    # A (10 hits, signal) split 4 + 3 + 3: three pure pieces of a signal particle, A lost.
    # B (8 hits, pT 0.5: not signal) 3 in a track, 5 unbuilt: a piece of another particle.
    # C and D (3 hits each) joined: a 6-hit junction, half each: mixed. E (4 hits): 3 in a
    # matched track, its fourth in a 3-hit track with 2 noise hits: majority noise.
    pid = [1] * 10 + [2] * 8 + [3] * 3 + [4] * 3 + [5] * 4 + [0] * 3
    pt = [2.0] * 10 + [0.5] * 8 + [2.0] * 6 + [2.0] * 4 + [0.0] * 3
    truth = hand_truth(pid, pt=pt)
    tracks = ([1] * 4 + [2] * 3 + [3] * 3       # A in three pieces
              + [4] * 3 + [90, 91, 92, 93, 94]  # B: one 3-hit piece, the rest alone
              + [5] * 6                         # C + D joined
              + [6] * 3 + [7]                   # E: 3 of 4 together (matched)
              + [7, 7, 8])                      # 2 noise hits with E's fourth: noise majority
    evaluation = evaluate_event(truth, submission(tracks), MetricCuts())
    kinds = dict(zip(evaluation.tracks["track_id"], evaluation.tracks["fake_kind"]))
    assert kinds == {1: "piece_signal", 2: "piece_signal", 3: "piece_signal",
                     4: "piece_other", 5: "mixed", 6: "", 7: "noise"}
    figures = event_summary(evaluation)
    assert figures["n_tracks"] == 7 and figures["n_fake_tracks"] == 6
    assert figures["fake_rate_piece_signal"] == pytest.approx(3 / 7)
    assert figures["fake_rate_piece_other"] == pytest.approx(1 / 7)
    assert figures["fake_rate_mixed"] == pytest.approx(1 / 7)
    assert figures["fake_rate_noise"] == pytest.approx(1 / 7)
    assert sum(figures[f"fake_rate_{k}"] for k in FAKE_KINDS) == pytest.approx(
        figures["fake_rate"])
    # Under the one-way (atlas) matching the pure pieces match: only mixed and noise fakes.
    atlas = event_summary(evaluate_event(truth, submission(tracks), MetricCuts(matching="atlas")))
    assert (atlas["fake_rate_piece_signal"], atlas["fake_rate_piece_other"]) == (0.0, 0.0)
    assert atlas["fake_rate"] == pytest.approx(2 / 7)
    # The CLI prints every kind, in the library's order.
    assert tuple(FAKE_KIND_NAMES) == FAKE_KINDS
    assert "pieces of signal particles 42.86 %" in format_table(
        {**figures, "n_events": 1}, [figures])


def test_efficiency_split_by_production_radius():
    # A prompt (r_v 0.02 mm) found, B prompt (1 mm: still prompt) lost, C secondary (40 mm)
    # found, D secondary (300 mm) lost; 4 hits each.
    pid = [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    radius = [0.02] * 4 + [1.0] * 4 + [40.0] * 4 + [300.0] * 4
    tracks = [1] * 4 + [20, 21, 22, 23] + [3] * 4 + [40, 41, 42, 43]
    figures = summary(hand_truth(pid, production_radius=radius), tracks)
    assert (figures["n_signal_prompt"], figures["n_signal_secondary"]) == (2, 2)
    assert figures["efficiency_prompt"] == 0.5 and figures["efficiency_secondary"] == 0.5
    only_c = summary(hand_truth(pid, production_radius=radius),
                     list(range(10, 18)) + [3] * 4 + [40, 41, 42, 43])
    assert (only_c["efficiency_prompt"], only_c["efficiency_secondary"]) == (0.0, 0.5)
    particles = evaluate_event(hand_truth(pid, production_radius=radius),
                               submission(tracks)).particles
    rate = standard_rates(particles, evaluate_event(hand_truth(pid), submission(tracks)).tracks,
                          1.0, None, 3)["efficiency_vs_production_radius"]
    assert rate.total.tolist() == [2, 0, 0, 1, 0, 1]      # 1 mm is prompt: the first bin
    assert rate.passed.tolist() == [1, 0, 0, 1, 0, 0]
    # by the particle's hits: A-D have 4 each, all in the 4-hit bin
    by_hits = standard_rates(particles, evaluate_event(hand_truth(pid), submission(tracks)).tracks,
                             1.0, None, 3)["efficiency_vs_particle_hits"]
    assert by_hits.total.tolist() == [0, 4, 0, 0, 0, 0, 0, 0, 0]
    assert by_hits.passed.tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 0]
    # a 40-hit particle (a looper) counts in the last bin, not outside the histogram
    long_one = evaluate_event(hand_truth([7] * 40), submission([1] * 40))
    last = standard_rates(long_one.particles, long_one.tracks, 1.0, None, 3)[
        "efficiency_vs_particle_hits"]
    assert last.total.tolist()[-1] == 1 and last.passed.tolist()[-1] == 1
    # without production vertices there is no split
    assert "efficiency_prompt" not in summary(hand_truth(pid), tracks)


def test_cuts_select_signal_particles():
    pid = [1] * 4 + [2] * 4 + [3] * 2
    truth = hand_truth(pid, pt=[2.0] * 4 + [1.5] * 4 + [5.0] * 2,
                       eta=[0.5] * 4 + [3.0] * 4 + [0.0] * 2)
    tracks = [1] * 4 + [2] * 4 + [3] * 2
    assert summary(truth, tracks)["n_signal_particles"] == 2       # C has 2 hits < 3
    assert summary(truth, tracks, max_eta=2.5)["n_signal_particles"] == 1
    assert summary(truth, tracks, pt_min=1.8)["n_signal_particles"] == 1
    # C's 2 hits lie on 2 layers: no curvature, no signal unless the layer count is dropped
    assert summary(truth, tracks, min_hits=2, min_track_hits=2)["n_signal_particles"] == 2
    assert summary(truth, tracks, min_hits=2, min_track_hits=2,
                   min_layers=0)["n_signal_particles"] == 3


def test_duplicates_pool_over_events():
    truth = hand_truth([1] * 9)
    first = evaluate_event(truth, submission([1] * 3 + [2] * 3 + [3] * 3),
                           MetricCuts(matching="atlas"))
    assert first.tracks["duplicate"].sum() == 2
    other = hand_truth([1] * 4, event_id=2)
    second = evaluate_event(other, submission([1] * 4), MetricCuts(matching="atlas"))
    pooled = overall_summary([first, second])
    assert pooled["n_events"] == 2 and pooled["n_matched_tracks"] == 4
    assert pooled["duplicate_rate"] == pytest.approx(2 / 4)
    assert pooled["efficiency"] == 1.0
    assert pooled["trackml_score"] == pytest.approx(
        np.mean([first.trackml_score, second.trackml_score]))


def test_missing_hits_and_empty_denominators():
    truth = hand_truth([1] * 5 + [0] * 3)
    partial = pd.DataFrame({"hit_id": [1, 2, 3, 4], "track_id": [0, 0, 0, 0]})
    result = event_summary(evaluate_event(truth, partial))
    assert result["efficiency"] == 1.0 and result["n_tracks"] == 1
    noise_only = hand_truth([0] * 4)
    empty = event_summary(evaluate_event(noise_only, submission([0, 1, 2, 3])))
    assert empty["n_signal_particles"] == 0 and math.isnan(empty["efficiency"])


def test_binned_rate_intervals():
    binned = binned_rate(np.array([0.5, 0.5, 1.5, 1.5, 1.5]),
                         np.array([True, True, True, False, False]), np.array([0.0, 1, 2, 3]))
    assert binned.passed.tolist() == [2, 1, 0] and binned.total.tolist() == [2, 3, 0]
    low, high = binned.interval()
    assert high[0] == 1.0 and 0.0 < low[0] < 1.0       # k = n: the upper bound is 1
    assert low[1] < 1 / 3 < high[1]
    assert math.isnan(binned.rate[2]) and math.isnan(low[2])


def test_edge_metrics_counts_pairs_once():
    # Truth chain 0-1-2 (signal) and 3-4 (not signal); candidate edges with scores.
    record = Record(track_edges=torch.tensor([[0, 1, 3], [1, 2, 4]]),
                  particle_id=torch.tensor([1, 1, 1, 2, 2, 0]),
                  signal_hit=torch.tensor([True, True, True, False, False, False]),
                  edge_index=torch.tensor([[0, 1, 1, 3, 2], [1, 0, 2, 4, 5]]),
                  scores=torch.tensor([0.9, 0.8, 0.2, 0.7, 0.6]))
    record.num_nodes = 6
    metrics = edge_metrics(record, cut=0.5)
    # Kept pairs: {0,1} (twice), {3,4}, {2,5}: 3 pairs, 2 true; signal truth {0,1},{1,2}: 1 kept.
    assert (metrics["n_kept"], metrics["n_true_kept"], metrics["n_signal_kept"]) == (3, 2, 1)
    assert metrics["efficiency"] == 0.5 and metrics["purity"] == pytest.approx(2 / 3)
    pooled = pool_edge_metrics([metrics, metrics])
    assert pooled["n_kept"] == 6 and pooled["purity"] == pytest.approx(2 / 3)
    assert edge_metrics(Record(edge_index=torch.zeros(2, 0, dtype=torch.long)), 0.5) is None


def test_edge_metrics_split_prompt_and_secondary():
    """With production radii each population gets its edge efficiency and findable share: a
    prompt particle (hits 0-3) kept whole, a secondary (hits 4-7, made 40 mm out) cut in the
    middle, so its largest piece holds 2 of its 4 hits: not findable. A low-pT particle (8-10)
    is no signal and counts in neither."""
    n = 11
    pid = torch.tensor([1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3])
    truth = torch.tensor([[0, 1, 2, 4, 5, 6, 8, 9], [1, 2, 3, 5, 6, 7, 9, 10]])
    edges = torch.tensor([[0, 1, 2, 4, 6, 8, 0], [1, 2, 3, 5, 7, 9, 4]])
    record = Record(track_edges=truth, particle_id=pid, edge_index=edges,
                  signal_hit=torch.tensor([True] * 8 + [False] * 3),
                  y=torch.tensor([True] * 6 + [False]),
                  scores=torch.tensor([0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]),
                  production_radius=torch.tensor([0.01] * 4 + [40.0] * 4 + [0.01] * 3),
                  pt=torch.tensor([2.0] * 8 + [0.5] * 3), eta=torch.zeros(n),
                  nhits=torch.tensor([4] * 8 + [3] * 3), volume_id=torch.full((n,), 8),
                  layer_id=torch.tensor([2, 4, 6, 8, 2, 4, 6, 8, 2, 4, 6]))
    record.num_nodes = n
    metrics = edge_metrics(record, cut=0.5)
    assert (metrics["n_signal_truth_edges_prompt"], metrics["n_signal_kept_prompt"]) == (3, 3)
    assert (metrics["n_signal_truth_edges_secondary"],
            metrics["n_signal_kept_secondary"]) == (3, 2)
    assert (metrics["n_signal_particles_prompt"], metrics["n_findable_prompt"]) == (1, 1)
    assert (metrics["n_signal_particles_secondary"], metrics["n_findable_secondary"]) == (1, 0)
    assert metrics["efficiency_secondary"] == pytest.approx(2 / 3)
    assert metrics["findable_prompt"] == 1.0 and metrics["findable_secondary"] == 0.0
    record.scores[1] = 0.1                    # the prompt particle split 2 + 2: lost too
    lower = edge_metrics(record, cut=0.5)
    assert lower["findable_prompt"] == 0.0 and lower["efficiency_prompt"] == pytest.approx(2 / 3)
    pooled = pool_edge_metrics([metrics, lower])
    assert pooled["findable_prompt"] == 0.5 and pooled["n_signal_kept_secondary"] == 4
    del record.production_radius               # no radii: the overall figures alone
    assert "findable_prompt" not in edge_metrics(record, cut=0.5)
    assert "findable_prompt" not in pool_edge_metrics([metrics, edge_metrics(record, 0.5)])


def test_sorted_unique_and_membership_match_numpy():
    from trkx.arrays import contained, unique_sorted

    rng = np.random.default_rng(5)
    keys = rng.integers(0, 10**12, 5000)
    keys[::7] = keys[0]                        # repeats
    unique = unique_sorted(keys)
    np.testing.assert_array_equal(unique, np.unique(keys))
    probe = np.concatenate([keys[:300], rng.integers(0, 10**12, 300), [-1, 10**13]])
    np.testing.assert_array_equal(contained(probe, unique), np.isin(probe, keys))
    assert unique_sorted(np.zeros(0, np.int64)).size == 0
    assert not contained(np.array([3]), np.zeros(0, np.int64)).any()
