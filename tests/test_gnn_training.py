"""GNN training on real-event records: metrics, overfitting a tiny event, CLI round trip."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.data.record import load_record, save_record
from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.checkpoint import load_model
from trkx.gnn.inference import score_edges
from trkx.gnn.metrics import edge_metrics, weighted_auc
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule

from .gnn_records import graph_record

pytestmark = pytest.mark.usefixtures("one_thread")


def test_weighted_auc_equals_pair_count() -> None:
    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (40,), generator=generator).float() / 5  # many ties
    y = torch.rand(40, generator=generator) < 0.4
    w = torch.rand(40, generator=generator)
    num = den = 0.0
    for i, j in itertools.product(range(40), range(40)):
        if y[i] and not y[j]:
            pair = float(w[i] * w[j])
            den += pair
            num += pair * (1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0)
    assert weighted_auc(scores, y, w) == pytest.approx(num / den)


def test_edge_metrics_and_weights() -> None:
    scores = torch.tensor([0.9, 0.8, 0.2, 0.7, 0.1])
    y = torch.tensor([True, True, True, False, False])
    signal = torch.tensor([True, False, True, False, False])
    weights = edge_weights(y, signal, signal_weight=3.0, true_weight=1.5, fake_weight=0.5)
    assert weights.tolist() == [3.0, 1.5, 3.0, 0.5, 0.5]
    metrics = edge_metrics(scores, y, signal, weights, cut=0.5)
    assert metrics.efficiency == pytest.approx(1 / 2)   # signal edges 0 and 2, only 0 kept
    assert metrics.purity == pytest.approx(2 / 3)       # kept 0, 1, 3; true 0, 1
    logits = torch.logit(scores)
    expected = -(weights * (y * scores.log() + ~y * (1 - scores).log())).sum() / weights.sum()
    assert weighted_bce(logits, y, weights).item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.slow
def test_overfits_a_tiny_real_event(sample_prefix: Path) -> None:
    record = graph_record(sample_prefix, (-0.4, 0.4), fakes_per_true=2.0, seed=0)
    assert int(record.signal.sum()) > 20 and int(record.y.sum()) > 200
    torch.manual_seed(0)
    model = InteractionGNN(record.x.shape[1], hidden=32, n_graph_iters=2)
    module = GNNModule(model, graph_ops="csr", learning_rate=3e-3)
    optimizer = torch.optim.Adam(module.parameters(), lr=3e-3)
    steps = 180
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)  # calms the spikes
    for _ in range(steps):
        optimizer.zero_grad()
        loss = weighted_bce(module(record), record.y, module._weights(record))
        loss.backward()
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        scores = torch.sigmoid(module(record))
    metrics = edge_metrics(scores, record.y, record.signal, module._weights(record), 0.5)
    assert loss.item() < 0.05
    assert metrics.efficiency > 0.98 and metrics.purity > 0.97 and metrics.auc > 0.995


@pytest.mark.slow
def test_cli_train_then_infer(sample_prefix: Path, tmp_path: Path) -> None:
    train_dir, val_dir, out_dir = tmp_path / "train", tmp_path / "val", tmp_path / "scored"
    for i, phi in enumerate([(-3.2, -1.6), (-1.6, 0.0), (0.0, 1.6)]):
        save_record(graph_record(sample_prefix, phi, 1.0, seed=i), train_dir / f"event{i}.pt")
    save_record(graph_record(sample_prefix, (1.6, 3.2), 1.0, seed=9), val_dir / "event9.pt")
    config = Path(__file__).resolve().parents[1] / "configs" / "gnn.yaml"
    run = tmp_path / "run"
    sets = [f"data.train_dir={train_dir}", f"data.val_dir={val_dir}", "model.hidden=16",
            "model.n_graph_iters=2", "trainer.max_steps=18", "trainer.progress_bar=false",
            "trainer.logger=none", "trainer.monitor=val_auc", "trainer.monitor_mode=max",
            "module.learning_rate=0.005", "module.lr_warmup_steps=2", "model.edge_features=0"]
    status = main(["train", "gnn", "--config", str(config), "--checkpoint", str(run / "gnn.pt"),
                   *(item for s in sets for item in ("--set", s))])
    assert status == 0 and (run / "gnn.pt").is_file()
    payload = torch.load(run / "gnn.pt", weights_only=True)
    assert payload["metrics"]["val_auc"] > 0.8  # well above chance after 18 steps

    assert main(["infer", "gnn", "--checkpoint", str(run / "gnn.pt"), "--events",
                 str(val_dir), "--out", str(out_dir), "--set", "inference.graph_ops=scatter"]) == 0
    scored, original = load_record(out_dir / "event9.pt"), load_record(val_dir / "event9.pt")
    assert torch.equal(scored.edge_index, original.edge_index)
    assert scored.scores.shape == original.y.shape and scored.scores.dtype == torch.float32
    # The CLI's scores are the stored model's, computed here in-process with the other kernel.
    model, _ = load_model(run / "gnn.pt")
    expected = score_edges(model, original.x, original.edge_index, graph_ops="csr")
    torch.testing.assert_close(scored.scores, expected, rtol=1e-5, atol=1e-6)
    auc = weighted_auc(scored.scores, scored.y, torch.ones_like(scored.scores))
    assert auc > 0.8


def test_cli_names_bad_config_keys_and_records(sample_prefix: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = Path(__file__).resolve().parents[1] / "configs" / "gnn.yaml"
    save_record(graph_record(sample_prefix, (0.0, 1.0), 1.0, seed=0), tmp_path / "d" / "a.pt")
    assert main(["train", "gnn", "--config", str(config), "--checkpoint", str(tmp_path / "r.pt"),
                 "--set", f"data.train_dir={tmp_path / 'd'}", "--set", "model.hiden=8"]) == 2
    assert "unknown key 'hiden' (did you mean 'hidden'?)" in capsys.readouterr().err
    broken = load_record(tmp_path / "d" / "a.pt")
    del broken.signal
    save_record(broken, tmp_path / "e" / "b.pt")
    assert main(["train", "gnn", "--config", str(config), "--checkpoint", str(tmp_path / "r.pt"),
                 "--set", f"data.train_dir={tmp_path / 'e'}", "--set", "data.val_events=0",
                 "--set", "trainer.max_steps=1", "--set", "model.edge_features=0"]) == 2
    assert "b.pt: record has no 'signal'" in capsys.readouterr().err
    assert main(["train", "gnn", "--config", str(config), "--checkpoint", str(tmp_path / "r.pt"),
                 "--set", f"data.train_dir={tmp_path / 'd'}", "--set", "data.val_events=0"]) == 2
    assert ("a.pt: the GNN uses edge inputs but the record has no scores (the filter's)"
            in capsys.readouterr().err)
