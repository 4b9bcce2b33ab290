"""EmbeddingModule learns; edge labels on a hand-made event; train + infer through the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trkx.data.detector import load_detector
from trkx.data.events import event_record
from trkx.data.record import load_record
from trkx.data.record_type import Record
from trkx.embedding.labels import graph_metrics, label_edges
from trkx.embedding.model import EmbeddingMLP
from trkx.embedding.module import EmbeddingModule

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def sample_record(sample_prefix: Path) -> Record:
    return event_record(str(sample_prefix), load_detector(), use_cells=True, signal_pt_min=1.0)


@pytest.mark.slow
def test_loss_decreases_and_graph_improves(sample_record: Record) -> None:
    torch.manual_seed(0)
    module = EmbeddingModule(EmbeddingMLP(sample_record.x.shape[1], hidden=64, layers=2),
                             margin=0.2, radius=0.2, max_neighbours=20)
    optimiser = torch.optim.Adam(module.parameters(), lr=3e-3)

    def efficiency() -> float:
        record = sample_record.clone()
        record.edge_index = module.build_graph(record)
        record.y, record.y_pid, record.signal = label_edges(record, record.edge_index)
        return graph_metrics(record)["edge_efficiency"]

    before = efficiency()
    losses = []
    for _ in range(30):
        loss = module.event_loss(sample_record)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:3])
    assert efficiency() > before + 0.1


def test_edge_labels_on_a_hand_made_event() -> None:
    # Particle 7 (signal): hits 0 -> 1 -> 2; particle 9 (not signal): hits 3 -> 4; hit 5 noise.
    record = Record(particle_id=torch.tensor([7, 7, 7, 9, 9, 0]),
                  track_edges=torch.tensor([[0, 1, 3], [1, 2, 4]]),
                  signal_hit=torch.tensor([True, True, True, False, False, False]))
    record.num_nodes = 6
    edges = torch.tensor([[1, 0, 3, 0, 5, 2],
                          [0, 2, 4, 3, 0, 1]])  # reversed truth, skip, other, fake, noise
    y, y_pid, signal = label_edges(record, edges)
    assert y.tolist() == [True, False, True, False, False, True]
    assert y_pid.tolist() == [True, True, True, False, False, True]
    assert signal.tolist() == [True, False, False, False, False, True]
    record.edge_index, record.y, record.y_pid, record.signal = edges, y, y_pid, signal
    metrics = graph_metrics(record)
    assert metrics["edge_efficiency"] == 1.0  # both signal truth pairs kept
    assert metrics["purity"] == pytest.approx(3 / 6)      # truth-graph edges 0, 2, 5
    assert metrics["purity_pid"] == pytest.approx(4 / 6)  # and the skip 0 -> 2 of particle 7
    assert metrics["edges_per_hit"] == 1.0


@pytest.mark.slow
def test_cli_train_then_infer(sample_prefix: Path, tmp_path: Path) -> None:
    from trkx.cli import main

    events = tmp_path / "events"
    events.mkdir()
    for number in (1, 2):
        for part in ("hits", "cells", "particles", "truth"):
            source = Path(f"{sample_prefix}-{part}.csv.gz")
            (events / f"event{number:09d}-{part}.csv.gz").symlink_to(source)
    config = Path(__file__).resolve().parents[1] / "configs" / "embedding.yaml"
    checkpoint = tmp_path / "embedding.pt"
    sets = [f"data.train_dir={events}", "data.train_events=1", "data.val_events=1",
            "trainer.max_steps=2", "trainer.progress_bar=false", "trainer.logger=none",
            "trainer.max_time=null", "trainer.val_every_n_epochs=1", "model.hidden=16",
            "model.layers=1"]
    code = main(["train", "embedding", "--config", str(config), "--checkpoint", str(checkpoint),
                 *(item for s in sets for item in ("--set", s))])
    assert code == 0 and checkpoint.is_file()
    out = tmp_path / "graphs"
    code = main(["infer", "embedding", "--config", str(config), "--checkpoint", str(checkpoint),
                 "--events", str(events), "--out", str(out)])
    assert code == 0
    written = sorted(out.glob("*.pt"))
    assert [p.name for p in written] == ["event000000001.pt", "event000000002.pt"]
    record = load_record(written[0])
    src, dst = record.edge_index
    assert record.edge_index.shape[1] > 0 and not torch.any(src == dst)
    assert record.y.shape == record.y_pid.shape == record.signal.shape == src.shape
    assert torch.all(record.pos[src, 0] <= record.pos[dst, 0])
