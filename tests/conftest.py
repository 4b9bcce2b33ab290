"""Shared fixtures: the real TrackML data folder (tests skip clearly when it is absent), one
torch thread for a test, and one tiny trained pipeline per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]


def trackml_data_dir() -> Path:
    """$TRKX_DATA, else the shared data folder beside the checkout."""
    env = os.environ.get("TRKX_DATA")
    return Path(env) if env else _REPO.parent / "shared" / "data" / "trackml"


@pytest.fixture(scope="session")
def trackml_dir() -> Path:
    path = trackml_data_dir()
    if not (path / "sample_event").is_dir():
        pytest.skip(f"real TrackML data not found at {path} (set TRKX_DATA to the folder "
                    "holding sample_event/, kaggle_hits/, kaggle_particles/, detector/)")
    return path


@pytest.fixture(scope="session")
def sample_prefix(trackml_dir: Path) -> Path:
    return trackml_dir / "sample_event" / "event000000001"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch intra-op thread during the test, the previous count restored after. Tiny
    graphs gain nothing from threads, and on the shared CPU OpenMP threads of several jobs
    oversubscribe the cores (measured: 10x slower steps with 2 threads under load). A module
    takes it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``trkx run`` of the tiny configuration of tests/test_pipeline_run.py, once per session
    (it is the slowest fixture): ``(config, workdir)``. Tests that change the workdir restore it."""
    from tests.test_pipeline_run import tiny_config
    from trkx.cli import main as trkx_main

    base = tmp_path_factory.mktemp("run")
    config = tiny_config(base)
    workdir = base / "work"
    assert trkx_main(["run", str(config), "--workdir", str(workdir)]) == 0
    return config, workdir


@pytest.fixture(scope="module")
def gnn_data(sample_prefix: Path, tmp_path_factory: pytest.TempPathFactory,
                         ) -> tuple[Path, Path]:
    """`trkx train gnn` data (tests/test_training_driver.py): three training graphs (one event
    per step) and one validation graph."""
    from tests.gnn_records import graph_record
    from trkx.data.record import save_record

    root = tmp_path_factory.mktemp("records")
    for i, phi in enumerate([(-3.2, -2.2), (-1.6, -0.6), (0.0, 1.0)]):
        save_record(graph_record(sample_prefix, phi, 1.0, seed=i),
                    root / "train" / f"event{i:09d}.pt")
    save_record(graph_record(sample_prefix, (1.6, 2.6), 1.0, seed=9),
                root / "val" / "event000000009.pt")
    return root / "train", root / "val"


@pytest.fixture(params=["compiled", "torch"])
def agreement_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which implementation the edge agreements take (trkx.edges.agreement): the compiled
    kernel (the CPU's, needs numba) or the torch enumeration (the GPU's, forced on the CPU)."""
    import trkx.edges.agreement

    if request.param == "torch":
        monkeypatch.setattr(trkx.edges.agreement, "COMPILED_DEVICES", ())
    else:
        pytest.importorskip("numba")
    return request.param
