"""Working points chosen on validation data: edge cuts, schedules, the track builder's cut."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from trkx.schedules import warmup_cosine
from trkx.tracks.building import TrackBuilder
from trkx.tracks.tuning import tune_cut
from trkx.working_point import cut_for_efficiency

from .tracks_events import noise_free_simulated_record


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
    assert low and all(s[1] < 0.5 for s in low)   # merged tracks match nothing
    assert not math.isnan(tuned.fake_rate) and tuned.fake_rate <= 0.05
