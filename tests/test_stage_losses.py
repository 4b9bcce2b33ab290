"""trkx/tracks/evaluate/stage_losses.py: where each stage loses the signal edges, on two
hand-made events whose kept and lost edges are known (the second stage loses one of the three
signal pairs of the first event and none of the second's)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trkx.data.record_type import Record
from trkx.tracks.evaluate.stage_losses import (
    PT_BINS,
    VERTEX_Z_BINS,
    StageGraphs,
    edge_losses,
    efficiency_by,
    stage_edges,
)


def _record(edges: list[tuple[int, int]], scores: list[float] | None) -> Record:
    """Six hits: a signal particle on hits 0-1-2-3 (pT 2 GeV, pixel barrel layers 2-8, from a
    vertex at z = -120 mm), a particle below the signal cut on hits 4-5; ``edges`` with their
    ``scores``."""
    track_edges = torch.tensor([[0, 1, 2, 4], [1, 2, 3, 5]])
    pid = torch.tensor([7, 7, 7, 7, 9, 9])
    index = torch.tensor(edges, dtype=torch.long).T
    record = Record(edge_index=index, track_edges=track_edges, particle_id=pid,
                  signal_hit=torch.tensor([True] * 4 + [False] * 2),
                  y=(pid[index[0]] == pid[index[1]]).float(),
                  pt=torch.tensor([2.0] * 4 + [0.5] * 2), eta=torch.tensor([0.1] * 6),
                  vertex_z=torch.tensor([-120.0] * 4 + [10.0] * 2),
                  volume_id=torch.full((6,), 8), layer_id=torch.tensor([2, 4, 6, 8, 2, 4]),
                  num_nodes=6, event_id=1)
    if scores is not None:
        record.scores = torch.tensor(scores)
    return record


@pytest.fixture()
def stages() -> list[StageGraphs]:
    every_pair = [(0, 1), (1, 2), (2, 3), (0, 4), (4, 5)]
    graph = [_record(every_pair, None), _record(every_pair, None)]
    # The GNN keeps (1, 0) and (2, 3) of the first event (one edge reversed), loses (1, 2);
    # it keeps all three signal pairs of the second.
    gnn = [_record([(1, 0), (1, 2), (2, 3), (4, 5)], [0.9, 0.2, 0.8, 0.9]),
           _record([(0, 1), (1, 2), (2, 3), (4, 5)], [0.9, 0.7, 0.8, 0.1])]
    return [StageGraphs("embedding", graph, None), StageGraphs("gnn", gnn, 0.5)]


def test_stage_edges_count_the_signal_pairs_each_stage_keeps(stages) -> None:
    report = stage_edges(stages)
    assert report["embedding"]["signal_pairs"] == pytest.approx(1.0)
    assert report["gnn"]["signal_pairs"] == pytest.approx(5 / 6)
    assert report["gnn"]["efficiency_of_received"] == pytest.approx(5 / 6)
    assert report["gnn"]["pixel_barrel_signal_pairs"] == pytest.approx(5 / 6)
    assert report["gnn"]["n_pixel_barrel_signal_pairs"] == 6


def test_efficiency_by_bins_the_kept_signal_pairs_by_their_particle(stages) -> None:
    result = efficiency_by(stages, "pt", PT_BINS)
    two_gev = int(np.digitize(2.0, PT_BINS)) - 1
    assert result["embedding"][two_gev] == pytest.approx(1.0)
    assert result["gnn"][two_gev] == pytest.approx(5 / 6)
    assert np.isnan(result["gnn"][0])    # no signal pair below 0.3 GeV


def test_efficiency_by_vertex_z_bins_the_pairs_by_their_vertex_distance(stages) -> None:
    result = efficiency_by(stages, "vertex_z", VERTEX_Z_BINS, absolute=True)
    far = int(np.digitize(120.0, VERTEX_Z_BINS)) - 1          # the 100-150 mm bin
    assert result["variable"] == "|vertex_z|"
    assert result["embedding"][far] == pytest.approx(1.0)
    assert result["gnn"][far] == pytest.approx(5 / 6)
    others = [i for i in range(len(VERTEX_Z_BINS) - 1) if i != far]
    assert all(np.isnan(result["gnn"][i]) for i in others)   # the vertex at -120 mm, not 0-50


def test_edge_losses_name_the_lost_pair(stages) -> None:
    losses = edge_losses(stages)
    assert losses["embedding"]["position"] == []
    position = {row["category"]: (row["lost"], row["of"]) for row in losses["gnn"]["position"]}
    assert position == {"middle": (1, 2)}
    pairs = {row["category"]: (row["lost"], row["of"]) for row in losses["gnn"]["layer_pair"]}
    assert pairs == {"8:4->8:6": (1, 2)}
