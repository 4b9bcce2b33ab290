"""`trkx infer --device auto|cpu|cuda` and ``TrainedPipeline.load(device=...)``
(trkx.runtime.device):
the device plumbing on the CPU (no CUDA is faked): ``cpu`` and ``auto`` give the default's
tracks byte for byte and say which device ran in timing.json and the summary line; ``cuda``
without CUDA and an unknown device are one line, exit 2; every stage keeps its tensors on the
pipeline's device, and the device stages create no tensor without saying where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from trkx.cli import main as trkx_main
from trkx.config import ConfigError
from trkx.data.detector import load_detector
from trkx.runtime.device import DEVICES, device_label, gpu_name, resolve_device

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


def test_resolve_device_choices() -> None:
    assert DEVICES == ("auto", "cpu", "cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert device_label(torch.device("cpu")) == "cpu"
    assert gpu_name(torch.device("cpu")) is None
    with pytest.raises(ConfigError, match=r"--device 'tpu' is not one of auto, cpu, cuda"):
        resolve_device("tpu", "--device")
    with pytest.raises(ConfigError, match=r"device 'meta' is not one of auto, cpu, cuda"):
        resolve_device(torch.device("meta"))


@NO_CUDA
def test_cuda_without_cuda_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(ConfigError, match=r"^device cuda: CUDA is not available \(.*\); use "
                                          r"device cpu or auto$"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_device(torch.device("cuda"))


@NO_CUDA
def test_infer_device_cuda_without_cuda_is_one_line_exit_2(tmp_path: Path, sample_prefix: Path,
                                                           capsys) -> None:
    # (the events folder is checked first, before torch loads: give a real one)
    code = trkx_main(["infer", "--device", "cuda", "--events", str(sample_prefix.parent),
                      "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("trkx infer: error: --device cuda: CUDA is not available")
    assert not (tmp_path / "out").exists()


def test_infer_unknown_device_is_an_argparse_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        trkx_main(["infer", "--device", "tpu", "--events", str(tmp_path),
                   "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --device: invalid choice: 'tpu'" in last
    assert "auto" in last and "cuda" in last


def test_infer_help_documents_the_device(capsys) -> None:
    with pytest.raises(SystemExit):
        trkx_main(["infer", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--device {auto,cpu,cuda}" in out
    assert "cuda when available" in out


@pytest.fixture(scope="module")
def sample_hits(trackml_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real sample event's hits only (5,527 hits; no truth: no evaluation step)."""
    folder = tmp_path_factory.mktemp("events")
    shutil.copy(trackml_dir / "sample_event" / "event000000001-hits.csv.gz", folder)
    return folder


@pytest.mark.slow
def test_device_cpu_and_auto_give_the_default_tracks_and_say_so(
        sample_hits: Path, tmp_path: Path, capsys) -> None:
    tracks, lines = {}, {}
    for name, extra in {"default": [], "cpu": ["--device", "cpu"],
                        "auto": ["--device", "auto"]}.items():
        out = tmp_path / name
        assert trkx_main(["infer", "--events", str(sample_hits), "--out", str(out),
                          *extra]) == 0
        lines[name] = capsys.readouterr().out
        tracks[name] = (out / "event000000001-tracks.csv").read_bytes()
        timing = json.loads((out / "timing.json").read_text())
        expected = "cuda:0" if name != "cpu" and torch.cuda.is_available() else "cpu"
        assert timing["device"] == expected, name
        assert (timing["gpu"] is None) == (expected == "cpu")
        assert list(timing)[:5] == ["device", "gpu", "precision", "graph_ops", "allocator"]
        assert f"(device {expected}, " in lines[name]
    if not torch.cuda.is_available():
        assert tracks["cpu"] == tracks["default"] == tracks["auto"]
    else:
        assert tracks["default"] == tracks["auto"]


class FactoryWithoutDevice(TorchFunctionMode):
    """Records every tensor factory called without ``device=``: on CUDA such a tensor lands on
    the CPU (a device mismatch, or a silent copy) even though the same code passes here."""

    FACTORIES = frozenset({torch.zeros, torch.ones, torch.full, torch.empty, torch.arange,
                           torch.rand, torch.randn, torch.randint, torch.tensor, torch.linspace})

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.checking = True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.checking and func in self.FACTORIES and kwargs.get("device") is None:
            self.calls.append(func.__name__)
        return func(*args, **kwargs)


@pytest.mark.slow
def test_every_stage_stays_on_the_pipeline_device(sample_hits: Path) -> None:
    """The API's device argument, the stages' outputs on it (returned on the CPU), and no
    device-less factory inside the device stages (embedding, search, filter, edge inputs,
    GNN). Track building, which is CPU code by design, is left out of the check."""
    from trkx.data.events import event_record
    from trkx.models import shipped_models
    from trkx.pipeline.inference import TrainedPipeline

    models = shipped_models()          # the hits-only set: the sample event's hits alone
    with pytest.raises(ConfigError, match="'tpu' is not one of"):
        TrainedPipeline.load(models.config, models.checkpoints, device="tpu")
    device = torch.device("cpu")
    pipeline = TrainedPipeline.load(models.config, models.checkpoints, device=device)
    assert pipeline.device == device
    for network in (pipeline.embedding, pipeline.filter, pipeline.gnn):
        assert {p.device for p in network.parameters()} == {device}
    record = event_record(str(sample_hits / "event000000001"), load_detector(),
                          pipeline.use_cells, pipeline.signal_pt_min, with_truth=False)

    mode = FactoryWithoutDevice()
    build = pipeline.builder.build_with_table
    seen: dict[str, set[torch.device]] = {}

    def build_unchecked(scored):
        seen["builder"] = {v.device for v in scored.to_dict().values()
                           if isinstance(v, torch.Tensor)}
        mode.checking = False
        return build(scored)

    object.__setattr__(pipeline.builder, "build_with_table", build_unchecked)
    with mode:
        graphs, labels, seconds = pipeline.run(record)
    object.__setattr__(pipeline.builder, "build_with_table", build)
    assert mode.calls == []
    assert seen["builder"] == {torch.device("cpu")}
    assert set(seconds) == {"embedding", "graph", "filter", "gnn", "tracks"}
    assert len(labels) == record.num_nodes
    for name, graph in graphs.items():
        assert {v.device for v in graph.to_dict().values()
                if isinstance(v, torch.Tensor)} == {torch.device("cpu")}, name
    assert graphs["gnn"].scores.shape[0] == graphs["gnn"].edge_index.shape[1] > 0
    tracks = pipeline.event_tracks(load_detector(), sample_hits / "event000000001").tracks
    assert (tracks.track_id.to_numpy() == labels).all()
