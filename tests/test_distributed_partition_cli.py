"""``trkx partition``: edge balance and analytic volumes per partitioner, no processes."""

from __future__ import annotations

import json

import pytest

from tests.test_distributed_partition import skewed_graph
from trkx.cli import main
from trkx.data.record import save_record
from trkx.data.record_type import Record
from trkx.gnn.distributed.block_counts import edge_imbalance
from trkx.gnn.distributed.figures import partition_figures
from trkx.gnn.distributed.partition import make_partition


def write_record(folder, with_pos: bool = True):
    pos, edge_index = skewed_graph()
    data = Record(x=pos.float(), edge_index=edge_index)
    if with_pos:
        data.pos = pos.float()
    data.num_nodes = pos.shape[0]
    save_record(data, folder / "event1.pt")
    return data


def test_partition_prints_balance_and_volumes(tmp_path, capsys):
    data = write_record(tmp_path)
    code = main(["partition", "--events", str(tmp_path), "-P", "4", "8",
                 "--partitioners", "sector", "balanced", "--json", str(tmp_path / "p.json")])
    assert code == 0
    out = capsys.readouterr().out
    table = json.loads((tmp_path / "p.json").read_text())
    assert set(table) == {"4", "8"} and set(table["4"]) == {"sector", "balanced"}
    owner = make_partition("balanced", 8, data.edge_index, data.pos, data.num_nodes)
    row = table["8"]["balanced"]
    assert row["edge_imbalance"] == pytest.approx(edge_imbalance(data.edge_index, owner, 8))
    assert row["edge_imbalance"] < table["8"]["sector"]["edge_imbalance"]
    direct = partition_figures(data.edge_index, data.pos, data.num_nodes, 4, "sector")
    assert table["4"]["sector"]["bytes"] == {k: {m: float(v) for m, v in d.items()}
                                             for k, d in direct["bytes"].items()}
    assert set(direct["bytes"]) == {"sparse-1d", "oblivious-1d", "1.5d-c2"}
    # sparse-1d moves the halo only: far less than oblivious-1d on a local graph
    assert direct["bytes"]["sparse-1d"]["total"] < 0.2 * direct["bytes"]["oblivious-1d"]["total"]
    line = next(ln for ln in out.splitlines() if ln.split()[:2] == ["8", "balanced"])
    assert f"{row['edge_imbalance']:.3f}" in line


def test_partition_names_missing_positions(tmp_path, capsys):
    write_record(tmp_path, with_pos=False)
    assert main(["partition", "--events", str(tmp_path), "-P", "4"]) == 2
    err = capsys.readouterr().err
    assert "event1.pt" in err and "'pos'" in err and len(err.strip().splitlines()) == 1


def test_partition_rejects_unknown_partitioner(tmp_path, capsys):
    write_record(tmp_path)
    assert main(["partition", "--events", str(tmp_path), "--partitioners", "spiral"]) == 2
    assert "spiral" in capsys.readouterr().err
