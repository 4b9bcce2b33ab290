"""The record type: attribute store semantics the stages rely on, and its contract's names."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from trkx.data.record import FIELDS
from trkx.data.record_type import OPTIONAL_FIELDS, Record


def test_the_optional_names_are_the_contracts_fields() -> None:
    assert {f.name for f in FIELDS} | {"feature_names"} == set(OPTIONAL_FIELDS)


def test_absent_fields_read_as_none_and_other_names_raise() -> None:
    record = Record(x=torch.zeros(4, 3), y=None)
    assert record.y is None and record.scores is None and "y" not in record
    with pytest.raises(AttributeError, match="no field 'graph_ops'"):
        _ = record.graph_ops
    assert getattr(record, "graph_ops", 7) == 7
    record.scores = torch.ones(2)
    record.scores = None                             # None removes the field
    assert "scores" not in record and record.keys() == ["x"]


def test_sizes_from_the_tensors_or_as_set() -> None:
    record = Record(pos=torch.zeros(6, 3), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]))
    assert record.num_nodes == 6 and record.num_edges == 3
    record.num_nodes = 9                             # a builder input without hit tensors
    assert record.num_nodes == 9 and record.to_dict()["num_nodes"] == 9
    assert Record().num_nodes is None and Record().num_edges == 0


def test_clone_copies_and_copy_shares() -> None:
    record = Record(x=torch.zeros(3, 2), feature_names=["r", "phi"])
    shared, cloned = copy.copy(record), record.clone()
    shared.x[0, 0] = 1.0
    assert record.x[0, 0] == 1.0 and cloned.x[0, 0] == 0.0
    shared.scores = torch.ones(1)                    # a new field on the copy only
    assert record.scores is None and cloned.feature_names == ["r", "phi"]
    cloned.feature_names.append("z")
    assert record.feature_names == ["r", "phi"]
    moved = record.to("cpu")
    assert moved is not record and moved.x is record.x and "x" in moved
    assert dict(record)["x"] is record.x and record["x"] is record.x


def test_inference_does_not_import_torch_geometric() -> None:
    """Importing PyG costs over a second; the inference path uses trkx's own record type."""
    code = ("import sys, trkx.cli.pipeline_infer, trkx.pipeline.inference, trkx.pipeline.batch;"
            "print('torch_geometric' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
