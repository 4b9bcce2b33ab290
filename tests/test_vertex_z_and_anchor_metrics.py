"""The efficiency by vertex |z|, the short particles' figures and the anchors' own count
(trkx.tracks.evaluate.metrics, trkx.tracks.evaluate.anchors) on hand-made events."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.tracks_events import hand_truth
from trkx.tracks.evaluate.anchors import ANCHOR_CUTS, anchor_evaluation, pixel_hits
from trkx.tracks.evaluate.event_truth import distinct_layers
from trkx.tracks.evaluate.metrics import (
    MetricCuts,
    evaluate_event,
    event_summary,
    overall_summary,
)
from trkx.tracks.evaluate.summary_text import anchor_line, short_particles_line, vertex_z_line

PIXEL, STRIP = 8000, 13000      # layer keys (volume * 1000 + layer): pixel barrel, strips


def tracks_of(track_of_hit) -> pd.DataFrame:
    return pd.DataFrame({"hit_id": np.arange(1, len(track_of_hit) + 1),
                         "track_id": np.asarray(track_of_hit)})


def test_distinct_layers_count_each_layer_once_and_skip_unknown():
    pid = np.array([1, 1, 1, 2, 2, 2, 2])
    layer = np.array([PIXEL + 2, PIXEL + 2, PIXEL + 4, -1, PIXEL + 2, PIXEL + 4, PIXEL + 6])
    assert distinct_layers(pid, layer, np.array([1, 2])).tolist() == [2, 3]


def test_efficiency_by_vertex_z_and_origin():
    # four prompt particles of 4 hits at vz 10, 70, 120, -200 mm and one secondary at vz 20;
    # the tracks find the first two, the secondary and not the far ones
    vz = [10.0, 70.0, 120.0, -200.0, 20.0]
    radius = [0.0, 0.0, 0.0, 0.0, 30.0]
    pid = np.repeat(np.arange(1, 6), 4)
    truth = hand_truth(pid, vertex_z=np.repeat(vz, 4), production_radius=np.repeat(radius, 4))
    found = np.repeat([1, 2, -1, -1, 5], 4)
    found[8:16] = np.arange(100, 108)           # the far particles' hits in singletons
    summary = event_summary(evaluate_event(truth, tracks_of(found)))
    assert summary["n_signal_vz_0_50"] == 2 and summary["efficiency_vz_0_50"] == 1.0
    assert summary["efficiency_vz_50_100"] == 1.0
    assert summary["efficiency_vz_100_150"] == 0.0 and summary["efficiency_vz_150_up"] == 0.0
    assert summary["n_signal_prompt_vz_0_50"] == 1 and summary["n_signal_secondary_vz_0_50"] == 1
    assert summary["efficiency_secondary_vz_0_50"] == 1.0
    # the short particles: prompt, |z| < 100 mm, by hits: both of 4 hits found
    assert summary["n_signal_prompt_near_hits_4"] == 2
    assert summary["efficiency_prompt_near_hits_4"] == 1.0
    assert summary["n_signal_prompt_near_hits_3"] == 0
    line = vertex_z_line(summary)
    assert "0-50 1.000 (2; prompt 1.000, secondary 1.000)" in line and "100-150 0.000" in line
    assert "4 1.000 (2)" in short_particles_line(summary)


def test_short_particles_on_two_layers_are_counted_apart():
    # two prompt particles of 3 hits near the beam: 1 on 3 layers (found), 2 on 2 layers (an
    # overlap pair on one of them, lost: its hits in singletons)
    pid = [1, 1, 1, 2, 2, 2]
    layer = [PIXEL + 2, PIXEL + 4, PIXEL + 6, PIXEL + 2, PIXEL + 2, PIXEL + 4]
    truth = hand_truth(pid, layer=layer, vertex_z=np.full(6, 5.0),
                       production_radius=np.zeros(6))
    # trkx's default signal needs 3 layers: particle 2 is none of it
    assert event_summary(evaluate_event(truth, tracks_of([1, 1, 1, 7, 8, 9])))[
        "n_signal_prompt_near_hits_3"] == 1
    # counted without the layer condition, the particles on <= 2 layers are split off
    summary = event_summary(evaluate_event(truth, tracks_of([1, 1, 1, 7, 8, 9]),
                                           MetricCuts(min_layers=0)))
    assert summary["n_signal_prompt_near_hits_3"] == 2
    assert summary["efficiency_prompt_near_hits_3"] == 0.5
    assert summary["n_signal_prompt_near_hits_3_few_layers"] == 1
    assert summary["efficiency_prompt_near_hits_3_few_layers"] == 0.0
    assert "3 0.500 (2; 1 on <= 2 layers: 0.000)" in short_particles_line(summary)


def test_anchor_line_splits_the_anchors_count_by_vertex_z_and_pixel_hits():
    # particle 1: prompt, vz 10, 3 pixel layers + 3 strip hits, found; particle 2: prompt,
    # vz -200, 4 pixel layers, lost (its hits in singletons); particle 3: a secondary at vz
    # 20 on 3 pixel layers, found. On the pixel part particle 1 has 3 hits, not 6.
    pid = [1] * 6 + [2] * 4 + [3] * 3
    layer = ([PIXEL + 2, PIXEL + 4, PIXEL + 6, STRIP + 2, STRIP + 4, STRIP + 6]
             + [PIXEL + 2, PIXEL + 4, PIXEL + 6, PIXEL + 8] + [PIXEL + 4, PIXEL + 6, PIXEL + 8])
    vz = np.array([10.0] * 6 + [-200.0] * 4 + [20.0] * 3)
    radius = np.array([0.0] * 10 + [40.0] * 3)
    truth = hand_truth(pid, layer=layer, vertex_z=vz, production_radius=radius)
    tracks = tracks_of([1] * 6 + [20, 21, 22, 23] + [3] * 3)
    anchors = overall_summary([anchor_evaluation(truth, tracks)])
    first, by_z, by_hits = anchor_line(anchors).split("\n")
    assert "efficiency 0.667 of 3 (prompt 0.500 of 2, secondary 1.000 of 1)" in first
    assert by_z.startswith("    by vertex |z| [mm]: 0-50 1.000 (2; prompt 1.000, secondary 1.000)")
    assert ">150 0.000 (1; prompt 0.000" in by_z
    # the prompt particle near the beam has 3 hits on the pixel part (its strip hits left out)
    assert by_hits.startswith("    prompt particles from |z| < 100 mm by pixel hits: 3 1.000 (1)")


def test_no_vertex_z_gives_no_split():
    truth = hand_truth([1] * 5)
    summary = event_summary(evaluate_event(truth, tracks_of([1] * 5)))
    assert "efficiency_vz_0_50" not in summary and vertex_z_line(summary) is None


def test_anchor_signal_takes_pt_above_0_9_and_three_pixel_layers():
    # 1: pT 0.95, 3 pixel layers (anchor signal only); 2: pT 2, 3 hits on 2 pixel layers and
    # 3 strip hits (trkx signal only); 3: pT 2, 4 pixel layers (both)
    pid = [1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    pt = [0.95] * 3 + [2.0] * 10
    layer = [PIXEL + 2, PIXEL + 4, PIXEL + 6,
             PIXEL + 2, PIXEL + 2, PIXEL + 4, STRIP + 2, STRIP + 4, STRIP + 6,
             PIXEL + 2, PIXEL + 4, PIXEL + 6, PIXEL + 8]
    truth = hand_truth(pid, pt=pt, layer=layer)
    tracks = tracks_of([1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3])
    own = event_summary(evaluate_event(truth, tracks))
    assert own["n_signal_particles"] == 2                     # particles 2 and 3
    anchors = overall_summary([anchor_evaluation(truth, tracks)])
    assert anchors["n_signal_particles"] == 2                 # particles 1 and 3
    assert anchors["efficiency"] == 1.0
    assert pixel_hits(truth).sum() == 10
    assert "efficiency 1.000 of 2" in anchor_line(anchors)


def test_anchor_fake_rate_counts_signal_majority_candidates_only():
    # signal particle 1 (8 hits) split 4 + 4 (two signal-majority fakes, the particle lost);
    # signal particle 2 (4 hits) found; the low-pT particle 3 found by a track of 3 of its 4
    # hits (matched, majority not signal); a track of 3 noise hits (a fake of trkx's count,
    # not of the anchors')
    pid = [1] * 8 + [2] * 4 + [3] * 4 + [0] * 3
    pt = [2.0] * 12 + [0.5] * 4 + [0.0] * 3
    layer = [PIXEL + 2 * i for i in range(8)] + [PIXEL + 2 * i for i in range(4)] \
        + [PIXEL + 2 * i for i in range(4)] + [PIXEL + 2] * 3
    truth = hand_truth(pid, pt=pt, layer=layer)
    track = [1] * 4 + [2] * 4 + [3] * 4 + [4, 4, 4, 99] + [5] * 3
    tracks = tracks_of(track)
    own = event_summary(evaluate_event(truth, tracks, MetricCuts()))
    assert own["n_tracks"] == 5 and own["n_fake_tracks"] == 3      # the halves, the noise
    assert own["fake_rate_signal_majority"] == 2 / 3               # halves of 1, of 3 with 2
    anchors = overall_summary([anchor_evaluation(truth, tracks)])
    assert anchors["efficiency"] == 0.5
    assert anchors["fake_rate_signal_majority"] == 2 / 3
    assert ANCHOR_CUTS.pt_min == 0.9 and ANCHOR_CUTS.min_layers == 3
