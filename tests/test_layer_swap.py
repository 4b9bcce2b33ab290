"""Layer swap: a track gives back another particle's pixel hit for its own lone one
(trkx.tracks.builder.layer_swap)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_track_extension import LAYERS, central_track
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.layer_swap import swap_layer_hits

KEYS = np.array([volume * 1000 + layer for volume, layer, _ in LAYERS])
WINDOWS = (1.0, 3.0)


def event_with_a_stray(held_offset: tuple[float, float], lone_offset: tuple[float, float],
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One track of 10 hits whose innermost-layer hit (8:2) is moved by ``held_offset`` (mm
    across, along the beam), plus one lone hit on that layer at ``lone_offset`` from the
    helix: positions (r, phi, z), layer keys, labels (the track 0, the lone hit 1)."""
    hits = central_track()
    noise = np.random.default_rng(5).normal(0.0, 0.01, size=(len(hits), 2))   # mm
    hits[:, 1] += noise[:, 0] / hits[:, 0]
    hits[:, 2] += noise[:, 1]
    r, phi, z = hits[0]
    held = (r, phi + held_offset[0] / r, z + held_offset[1])
    lone = (r, phi + lone_offset[0] / r, z + lone_offset[1])
    pos = np.vstack([np.array(held), hits[1:], np.array(lone)])
    layer = np.append(KEYS, KEYS[0])
    labels = np.array([0] * len(hits) + [1])
    return pos, layer, labels


def test_the_track_takes_its_own_hit_back_from_another_particles():
    # the walk took a hit 6 mm off along the beam; the particle's own hit lies alone on the helix
    pos, layer, labels = event_with_a_stray(held_offset=(0.3, 6.0), lone_offset=(0.0, 0.0))
    out, changed = swap_layer_hits(labels, pos, layer, WINDOWS, chi2_ratio=2.0)
    assert out[10] == out[1] == 0           # the lone hit joined the track
    assert out[0] not in (0, 1) and (out == out[0]).sum() == 1   # the stray is alone
    assert changed.tolist() == [0]


def test_a_track_whose_hit_lies_on_its_helix_keeps_it():
    # the held hit is the particle's own; a lone hit 0.4 mm away lies inside the windows too
    pos, layer, labels = event_with_a_stray(held_offset=(0.0, 0.0), lone_offset=(0.4, 0.5))
    out, changed = swap_layer_hits(labels, pos, layer, WINDOWS, chi2_ratio=2.0)
    assert out.tolist() == labels.tolist() and len(changed) == 0


def test_the_swap_waits_for_the_chi2_to_fall_by_the_ratio():
    pos, layer, labels = event_with_a_stray(held_offset=(0.3, 6.0), lone_offset=(0.0, 0.0))
    out, _ = swap_layer_hits(labels, pos, layer, WINDOWS, chi2_ratio=1e9)
    assert out.tolist() == labels.tolist()


def test_a_lone_hit_outside_the_windows_is_not_taken():
    pos, layer, labels = event_with_a_stray(held_offset=(0.3, 6.0), lone_offset=(2.0, 0.0))
    out, _ = swap_layer_hits(labels, pos, layer, WINDOWS, chi2_ratio=2.0)
    assert out.tolist() == labels.tolist()


def test_bad_options_are_refused():
    pos, layer, labels = event_with_a_stray(held_offset=(0.3, 6.0), lone_offset=(0.0, 0.0))
    with pytest.raises(ValueError, match="chi2_ratio"):
        swap_layer_hits(labels, pos, layer, WINDOWS, chi2_ratio=0.5)
    with pytest.raises(ValueError, match="swap_chi2_ratio"):
        TrackBuilder(swap_chi2_ratio=0.9)
