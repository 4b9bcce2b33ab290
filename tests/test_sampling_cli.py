"""``trkx train gnn`` with a ``sampling`` section trains on sampled minibatches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.data.record import save_record

from .test_sampling import random_graph

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "gnn_sampled.yaml"
SMALL = ["model.hidden=8", "model.n_graph_iters=1", "model.n_mlp_layers=1", "model.edge_features=0",
         "sampling.targets_per_batch=20", "sampling.hops=2", "sampling.bulk=2",
         "trainer.max_steps=4", "trainer.progress_bar=false", "trainer.logger=none",
         "trainer.min_signal_efficiency=0", "module.graph_ops=csr"]


def sets(overrides: list[str]) -> list[str]:
    return [item for override in overrides for item in ("--set", override)]


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path]:
    for seed, folder in [(1, "train"), (2, "train"), (3, "val")]:
        save_record(random_graph(seed, 80, 160), tmp_path / folder / f"event{seed}.pt")
    return tmp_path / "train", tmp_path / "val"


@pytest.mark.slow
def test_train_gnn_with_sampling_section(folders, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    train_dir, val_dir = folders
    run = tmp_path / "run"
    assert main(["train", "gnn", "--config", str(CONFIG), "--checkpoint", str(run / "gnn.pt"),
                 "--set", f"data.train_dir={train_dir}", "--set", f"data.val_dir={val_dir}",
                 *sets(SMALL)]) == 0
    payload = torch.load(run / "gnn.pt", weights_only=True)
    assert {"val_efficiency", "val_purity", "val_auc"} <= set(payload["metrics"])


@pytest.mark.parametrize(("override", "message"), [
    ("sampling.hops=0", "--set sampling.hops=0: hops must be >= 1"),
    ("sampling.fanout=[4]", "fanout needs one entry per hop (2)"),
    ("sampling.fan_out=[4,4]", "unknown key 'fan_out' (did you mean 'fanout'?)"),
])
def test_bad_sampling_config_is_named(folders, tmp_path: Path, override: str, message: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    train_dir, _ = folders
    assert main(["train", "gnn", "--config", str(CONFIG), "--checkpoint",
                 str(tmp_path / "r" / "gnn.pt"), "--set", f"data.train_dir={train_dir}",
                 "--set", "data.train_events=1", *sets([*SMALL, override])]) == 2
    assert message in capsys.readouterr().err
