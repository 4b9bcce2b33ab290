"""The GPU's code path, run on the CPU: the shipped cells set with the torch neighbour
search (the layer masked inside it), the filter and GNN forwards unblocked (as on a GPU: trkx.
device.ROW_BLOCKED_DEVICES), the filter's edge features and cell agreement as torch rows and the
GNN's edge agreement as the torch enumeration (not the CPU's compiled kernels: the
COMPILED_DEVICES of trkx.filter.features and trkx.edges.agreement).
On a phi sector of the real event 21001 with its cells, it must give the CPU path's graph and
tracks: both searches are exact (float32 distances summed in another order: a partner at a
tie of the k-th distance or of the radius may differ), the unblocked forwards are the blocked
ones' arithmetic, and the torch feature rows and agreements compute in float64 and round once,
as the kernels do. Their float64 functions (torch's vectorised asinh and atan2 against libm's)
may differ in a last bit, which the float32 rounding hides almost always (on the build machine
the same graph gave the same scores and tracks, bit for bit), so the same graph must give
scores within 1e-5 and the same track for all but 1e-4 of the hits on any CPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import trkx.edges.agreement as agreement_module
import trkx.embedding.graph as graph_module
import trkx.filter.features as features_module
import trkx.gnn.edge_inputs as edge_inputs_module
import trkx.runtime.device
from trkx.filter.model import FilterMLP
from trkx.gnn.model import InteractionGNN

pytestmark = pytest.mark.slow


def sector_event(prefix: Path, folder: Path, half_width: float) -> Path:
    """The hits of ``prefix`` with |phi| < half_width and their cells, written as an event of
    ``folder`` (same event id)."""
    folder.mkdir(parents=True, exist_ok=True)
    hits = pd.read_csv(f"{prefix}-hits.csv.gz")
    hits = hits[np.abs(np.arctan2(hits.y, hits.x)) < half_width]
    hits.to_csv(folder / f"{prefix.name}-hits.csv.gz", index=False)
    cells = pd.read_csv(f"{prefix}-cells.csv.gz")
    cells[cells.hit_id.isin(hits.hit_id)].to_csv(folder / f"{prefix.name}-cells.csv.gz",
                                                 index=False)
    return folder / prefix.name


def _refuse(*args, **kwargs):
    raise AssertionError("a row-blocked forward ran on the GPU's path")


def test_cells_set_on_the_gpu_path_gives_the_cpu_tracks(tmp_path: Path, trackml_dir: Path,
                                                        monkeypatch) -> None:
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.filter.features import has_cell_directions
    from trkx.models import shipped_models
    from trkx.pipeline.inference import TrainedPipeline

    models = shipped_models("pu200_cells")
    cpu = TrainedPipeline.load(models.config, models.checkpoints, device="cpu")
    assert cpu.embedding_options.other_layers_only and cpu.filter.cell_agreement
    assert cpu.gnn.edge_features == 10            # ... the edge agreement among its inputs
    prefix = sector_event(trackml_dir / "real_pixel_truth" / "event000021001",
                          tmp_path / "event", half_width=0.3)
    record = event_record(str(prefix), load_detector(), cpu.use_cells, cpu.signal_pt_min,
                          with_truth=False)
    assert has_cell_directions(record.feature_names) and record.num_nodes > 10_000
    reference_graphs, reference, _ = cpu.run(record)
    assert graph_module.resolve_backend(cpu.embedding_options.backend, record.x) == "bucket"

    calls: dict[str, int] = {"torch_search_with_layers": 0, "edge_agreement": 0,
                             "torch_feature_rows": 0}
    search, agreement = graph_module._torch_search, edge_inputs_module.edge_agreement
    rows = features_module.torch_rows

    def counted_rows(*args, **kwargs):
        calls["torch_feature_rows"] += 1
        return rows(*args, **kwargs)

    def counted_search(*args, **kwargs):
        calls["torch_search_with_layers"] += (args[4] if len(args) > 4 else
                                              kwargs.get("groups")) is not None
        return search(*args, **kwargs)

    def counted_agreement(*args, **kwargs):
        calls["edge_agreement"] += 1
        return agreement(*args, **kwargs)

    monkeypatch.setattr(trkx.runtime.device, "ROW_BLOCKED_DEVICES", ())
    monkeypatch.setattr(features_module, "COMPILED_DEVICES", ())
    monkeypatch.setattr(agreement_module, "COMPILED_DEVICES", ())
    monkeypatch.setattr(features_module, "torch_rows", counted_rows)
    monkeypatch.setattr(graph_module, "_torch_search", counted_search)
    monkeypatch.setattr(edge_inputs_module, "edge_agreement", counted_agreement)
    for name in ("_iteration_blocked", "_edge_mlp_blocked"):
        monkeypatch.setattr(InteractionGNN, name, _refuse)
    monkeypatch.setattr(FilterMLP, "_forward_blocked", _refuse)
    gpu_path = dataclasses.replace(
        cpu, embedding_options=dataclasses.replace(cpu.embedding_options, backend="torch"))
    gpu_path.warm_up()                            # the warm-up takes the same path
    graphs, labels, _ = gpu_path.run(record)
    assert calls["torch_search_with_layers"] == 2 and calls["edge_agreement"] == 2
    assert calls["torch_feature_rows"] >= 2           # the warm-up's and the event's

    def pairs(graph) -> set[tuple[int, int]]:
        return set(map(tuple, graph.edge_index.t().tolist()))

    ours, theirs = pairs(graphs["embedding"]), pairs(reference_graphs["embedding"])
    assert len(ours ^ theirs) <= 1e-4 * len(theirs)
    hits = torch.arange(len(labels)).numpy()
    mates = pd.Series(hits).groupby(labels).transform("min").to_numpy()
    reference_mates = pd.Series(hits).groupby(reference).transform("min").to_numpy()
    assert (mates != reference_mates).mean() <= 1e-3
    if not ours ^ theirs:                         # the same graph: the same tracks
        torch.testing.assert_close(graphs["gnn"].scores, reference_graphs["gnn"].scores,
                                   rtol=0, atol=1e-5)
        assert (mates != reference_mates).mean() <= 1e-4
