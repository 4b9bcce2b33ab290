"""Edge filter: overfits a tiny event, chunked == unchunked, no-cell records, CLI round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trkx.data.detector import load_detector
from trkx.data.events import event_record
from trkx.data.record import load_record, save_record
from trkx.data.record_type import Record
from trkx.embedding.graph import build_edges
from trkx.embedding.labels import label_edges
from trkx.filter.features import edge_feature_count, edge_features
from trkx.filter.inference import filter_graph, score_edges
from trkx.filter.model import FilterMLP
from trkx.filter.module import FilterModule, filter_metrics


def _geometric_graph(record: Record, keep_hits: np.ndarray) -> Record:
    """The hits ``keep_hits`` of ``record`` with a labelled neighbour graph in (x, y, z)."""
    index = torch.as_tensor(keep_hits)
    new = torch.full((int(record.num_nodes),), -1, dtype=torch.int64)
    new[index] = torch.arange(len(index))
    edges = new[record.track_edges]
    sub = Record(x=record.x[index], pos=record.pos[index], particle_id=record.particle_id[index],
               signal_hit=record.signal_hit[index],
               track_edges=edges[:, (edges >= 0).all(0)], hit_id=record.hit_id[index],
               event_id=record.event_id)
    sub.num_nodes = len(index)
    sub.feature_names = list(record.feature_names)
    r, phi, z = sub.pos.T
    xyz = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], 1) / 1000.0
    sub.edge_index = build_edges(xyz, 0.25, 8, "kdtree", pos=sub.pos)
    sub.y, sub.y_pid, sub.signal = label_edges(sub, sub.edge_index)
    return sub


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def sample_record(sample_prefix: Path) -> Record:
    return event_record(str(sample_prefix), load_detector(), use_cells=True, signal_pt_min=1.0)


@pytest.fixture(scope="module")
def tiny_event(sample_record: Record) -> Record:
    """About 40 particles' hits plus some noise, with a graph of true and fake edges."""
    rng = np.random.default_rng(0)
    pid = sample_record.particle_id.numpy()
    chosen = rng.choice(np.unique(pid[pid != 0]), 40, replace=False)
    noise = rng.choice(np.flatnonzero(pid == 0), 30, replace=False)
    hits = np.sort(np.concatenate([np.flatnonzero(np.isin(pid, chosen)), noise]))
    return _geometric_graph(sample_record, hits)


@pytest.mark.slow
def test_overfits_a_tiny_event(tiny_event: Record) -> None:
    true = tiny_event.y  # the default target: truth-graph edges, what the GNN learns next
    assert 20 < int(true.sum()) < true.numel() - 20  # both classes present
    torch.manual_seed(0)
    module = FilterModule(FilterMLP(11, cell_agreement=True, hidden=64, layers=3),
                          learning_rate=3e-3)
    optimiser = torch.optim.Adam(module.parameters(), lr=3e-3)
    for _ in range(600):
        loss = module.edge_loss(tiny_event)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    scores = module.scores(tiny_event)
    assert float(scores[true].min()) > 0.5 > float(scores[~true].max())
    metrics = filter_metrics(tiny_event, scores, 0.5)
    assert metrics["signal_efficiency"] == 1.0 and metrics["fake_rejection"] == 1.0


def test_chunked_and_unchunked_inference_agree(tiny_event: Record) -> None:
    torch.manual_seed(1)
    network = FilterMLP(11, cell_agreement=True, hidden=32, layers=2)
    whole = score_edges(network, tiny_event, chunk_size=None)
    chunked = score_edges(network, tiny_event, chunk_size=7)
    assert whole.shape == (tiny_event.edge_index.shape[1],)
    torch.testing.assert_close(chunked, whole)
    out = filter_graph(network, tiny_event, score_cut=float(whole.median()), chunk_size=13)
    keep = whole >= float(whole.median())
    assert torch.equal(out.edge_index, tiny_event.edge_index[:, keep])
    assert torch.equal(out.y_pid, tiny_event.y_pid[keep])
    torch.testing.assert_close(out.scores, whole[keep])


def test_works_without_cell_features(tiny_event: Record) -> None:
    plain = tiny_event.clone()
    plain.x = tiny_event.x[:, :3]
    plain.feature_names = ["r", "phi", "z"]
    features = edge_features(plain.x, plain.pos, plain.edge_index, plain.feature_names)
    assert features.shape == (plain.edge_index.shape[1], edge_feature_count(3, False))
    # The hits-only features are the (r, phi, z) part of the cells record's features, cells
    # columns left out.
    with_cells = edge_features(tiny_event.x, tiny_event.pos, tiny_event.edge_index,
                               tiny_event.feature_names)
    torch.testing.assert_close(features, torch.cat(
        [with_cells[:, :3], with_cells[:, 11:14], with_cells[:, 22:26]], dim=1))
    module = FilterModule(FilterMLP(3, cell_agreement=False, hidden=16, layers=1))
    loss = module.edge_loss(plain)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    # A cell-trained filter refuses a record without cells, naming the problem.
    with pytest.raises(ValueError, match="use_cells"):
        score_edges(FilterMLP(3, cell_agreement=True), plain)


@pytest.mark.slow
def test_cli_round_trip(tiny_event: Record, tmp_path: Path) -> None:
    from trkx.cli import main

    graphs = tmp_path / "graphs"
    for event_id in (1, 2):
        record = tiny_event.clone()
        record.event_id = torch.tensor(event_id)
        save_record(record, graphs / f"event{event_id:09d}.pt")
    config = Path(__file__).resolve().parents[1] / "configs" / "filter.yaml"
    checkpoint = tmp_path / "filter.pt"
    sets = [f"data.train_dir={graphs}", "data.train_events=1", "data.val_events=1",
            "trainer.max_steps=2", "trainer.progress_bar=false", "trainer.logger=none",
            "trainer.max_time=null", "trainer.val_every_n_epochs=1",
            "trainer.min_signal_efficiency=0", "model.hit_features=11", "model.hidden=16",
            "model.layers=1"]
    code = main(["train", "filter", "--config", str(config), "--checkpoint", str(checkpoint),
                 *(item for s in sets for item in ("--set", s))])
    assert code == 0 and checkpoint.is_file()
    out = tmp_path / "filtered"
    code = main(["infer", "filter", "--config", str(config), "--checkpoint", str(checkpoint),
                 "--events", str(graphs), "--out", str(out), "--set", "inference.score_cut=0.3"])
    assert code == 0
    written = sorted(out.glob("*.pt"))
    assert [p.name for p in written] == ["event000000001.pt", "event000000002.pt"]
    record = load_record(written[0])
    assert record.scores.shape == record.y.shape == (record.edge_index.shape[1],)
    assert torch.all(record.scores >= 0.3)
    assert record.edge_index.shape[1] <= tiny_event.edge_index.shape[1]


def test_stage_inference_reads_one_event_at_a_time(tmp_path, monkeypatch) -> None:
    """Inference streams its events (trkx.data.events.iter_records): the second record is
    read only after the first was consumed, so a folder of 100 pile-up-200 graphs (~16 GB)
    never sits in memory at once; load_records still returns them all."""
    import trkx.data.events as events

    for event_id in (7, 8, 9):
        save_record(Record(x=torch.zeros(4, 3), hit_id=torch.arange(4),
                         event_id=torch.tensor(event_id)), tmp_path / f"event{event_id:09d}.pt")
    reads = []
    real = events.load_record
    monkeypatch.setattr(events, "load_record", lambda p: reads.append(p) or real(p))
    stream = events.iter_records(tmp_path)
    assert reads == []
    first = next(stream)
    assert int(first.event_id) == 7 and len(reads) == 1
    assert [int(r.event_id) for r in stream] == [8, 9] and len(reads) == 3
    assert [int(r.event_id) for r in events.load_records(tmp_path, nevents=2, skip=1)] == [8, 9]
    with pytest.raises(FileNotFoundError, match="no such events folder"):
        events.iter_records(tmp_path / "missing")
