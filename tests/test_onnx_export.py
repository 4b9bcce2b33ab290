"""``trkx export``: the three networks of a shipped set as ONNX files that onnxruntime runs to
trkx's scores, with their signatures; bad arguments end in one line and exit 2, nothing
written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from trkx.cli import main
from trkx.packaging.onnx_export import TOLERANCE

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")


def test_export_of_the_hits_only_set_runs_in_onnxruntime(tmp_path, capsys):
    out = tmp_path / "onnx"
    assert main(["export", "--models", "pu200", "--out", str(out)]) == 0
    assert "largest score difference" in capsys.readouterr().out
    signatures = json.loads((out / "signatures.json").read_text())
    for stage in ("embedding", "filter", "gnn"):
        assert (out / f"{stage}.onnx").stat().st_size > 10_000
        assert 0 <= signatures[stage]["max_difference"] <= TOLERANCE
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*"))

    # the GNN file on a graph of another size than the traced one, against trkx's own scores
    from trkx.gnn.inference import score_edges
    from trkx.models import shipped_models
    from trkx.pipeline.inference import TrainedPipeline
    from trkx.runtime.fused_mlp import fused_inference

    shipped = shipped_models("pu200")
    pipeline = TrainedPipeline.load(shipped.config, shipped.checkpoints, device="cpu")
    generator = torch.Generator().manual_seed(7)
    x = torch.rand(150, 3, generator=generator)
    edge_index = torch.randint(0, 150, (2, 900), generator=generator)
    inputs = {"hits": x.numpy(), "edge_index": edge_index.numpy()}
    attr = None
    if pipeline.gnn.edge_features:
        attr = torch.randn(900, pipeline.gnn.edge_features, generator=generator)
        inputs["edge_inputs"] = attr.numpy()
    session = onnxruntime.InferenceSession(str(out / "gnn.onnx"),
                                           providers=["CPUExecutionProvider"])
    onnx_scores = session.run(None, inputs)[0]
    with fused_inference(False):
        ours = score_edges(pipeline.gnn, x, edge_index, "csr", edge_attr=attr).numpy()
    np.testing.assert_allclose(onnx_scores, ours, atol=TOLERANCE)


@pytest.mark.parametrize("arguments, message", [
    (["--config", "x.yaml"], "go together"),
    (["--models", "pu200", "--config", "x.yaml", "--checkpoints", "d"], "give one of them"),
    (["--models", "nothing_of_that_name"], "no shipped models named"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, arguments, message):
    out = tmp_path / "onnx"
    assert main(["export", "--out", str(out), *arguments]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("trkx export: error:") and message in error
    assert "\n" not in error and not out.exists()


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep me")
    assert main(["export", "--out", str(target)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert target.read_text() == "keep me"
