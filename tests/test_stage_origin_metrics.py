"""Every stage's validation splits its signal-edge efficiency into prompt and secondary
particles: the shared figures (trkx.edges.figures) and the embedding's graph metrics."""

from __future__ import annotations

import math

import torch

from trkx.data.record_type import Record
from trkx.edges.figures import kept_edges, origin_counts, origin_efficiencies, secondary_edges
from trkx.embedding.labels import graph_metrics


def test_origin_counts_pool_over_events_before_the_ratio() -> None:
    scores = torch.tensor([0.9, 0.2, 0.8, 0.7, 0.1])
    signal = torch.tensor([True, True, True, True, False])
    secondary = torch.tensor([False, False, True, True, True])
    one = origin_counts(kept_edges(scores, 0.5), signal, secondary)
    assert one == {"kept_prompt": 1, "total_prompt": 2, "kept_secondary": 2,
                   "total_secondary": 2}
    other = origin_counts(kept_edges(torch.tensor([0.9]), 0.5), torch.tensor([True]),
                          torch.tensor([False]))
    pooled = origin_efficiencies([one, other])
    assert pooled == {"efficiency_prompt": 2 / 3, "efficiency_secondary": 1.0}
    assert math.isnan(origin_efficiencies([other])["efficiency_secondary"])


def test_the_embedding_graph_metrics_split_by_origin() -> None:
    # particle 1 prompt (hits 0-2), particle 2 secondary (hits 3-5); truth chains 0-1-2, 3-4-5
    record = Record(num_nodes=6, track_edges=torch.tensor([[0, 1, 3, 4], [1, 2, 4, 5]]),
                  signal_hit=torch.ones(6, dtype=torch.bool),
                  production_radius=torch.tensor([0.01, 0.01, 0.01, 50.0, 50.0, 50.0]))
    record.edge_index = torch.tensor([[0, 1, 3, 0], [1, 2, 4, 3]])  # all but 4-5, one fake
    record.y = torch.tensor([True, True, True, False])
    record.y_pid = record.y.clone()
    record.signal = record.y.clone()
    assert secondary_edges(record).tolist() == [False, False, True, False]
    metrics = graph_metrics(record)
    assert metrics["edge_efficiency"] == 0.75
    assert metrics["edge_efficiency_prompt"] == 1.0
    assert metrics["edge_efficiency_secondary"] == 0.5
    del record.production_radius
    assert "edge_efficiency_secondary" not in graph_metrics(record)
