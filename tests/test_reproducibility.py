"""A seeded `trkx run` repeats: two work folders give the same weights and
tracks. The two causes found: CPU ``index_put_(accumulate=True)`` adds with atomics across
threads (the backward of the embedding's pair loss), and ``graph_ops: auto`` picks the GNN's
kernel by timing it on a loaded machine (docs/design.md, "Reproducibility")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from trkx.files.checkpoint import load_checkpoint
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.steps import plan_steps
from trkx.training.fit import _resume_key, _same_run, deterministic_algorithms

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def train_gnn_sets(config: Path, workdir: Path) -> list[str]:
    step = next(s for s in plan_steps(load_pipeline_config(config), workdir)
                if s.name == "train-gnn")
    return [step.argv[i + 1] for i, arg in enumerate(step.argv) if arg == "--set"]


def test_run_trains_the_gnn_with_the_recipe_kernel(tmp_path: Path) -> None:
    # configs/gnn.yaml leaves module.graph_ops to auto (timed on the host): trkx run passes
    # the recipe's kernel (csr), so the weights do not depend on the load of the machine
    assert train_gnn_sets(CONFIGS / "quickstart.yaml", tmp_path)[-1] == "module.graph_ops=csr"
    recipe = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    for plan in [*recipe["stages"].values(), recipe["tracks"]]:   # paths: from configs/
        plan["config"] = str(CONFIGS / plan["config"])
    path = tmp_path / "recipe.yaml"
    recipe["inference"]["graph_ops"] = "auto"          # auto asked for: auto it is
    path.write_text(yaml.safe_dump(recipe))
    assert not any(s.startswith("module.graph_ops") for s in train_gnn_sets(path, tmp_path))
    recipe["inference"]["graph_ops"] = "csr"          # a kernel the stage names is kept
    recipe["stages"]["gnn"]["overrides"].append("module.graph_ops=scatter")
    path.write_text(yaml.safe_dump(recipe))
    sets = train_gnn_sets(path, tmp_path)
    assert [s for s in sets if s.startswith("module.graph_ops")] == ["module.graph_ops=scatter"]


def test_a_run_resumes_under_another_kernel() -> None:
    # a stored GNN state trained under auto is still resumable
    auto = {"module": {"graph_ops": "auto", "learning_rate": 0.002}, "trainer": {"seed": 0}}
    csr = {"module": {"graph_ops": "csr", "learning_rate": 0.002}, "trainer": {"seed": 0}}
    assert _same_run(_resume_key(auto), csr)
    assert not _same_run(_resume_key(auto), {**csr, "module": {"learning_rate": 0.003}})


def test_deterministic_mode_is_restored_after_training() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    with deterministic_algorithms():
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    assert torch.are_deterministic_algorithms_enabled() == before
    with deterministic_algorithms(False):
        assert torch.are_deterministic_algorithms_enabled() == before


def test_index_gradient_repeats_with_two_threads() -> None:
    """The embedding's pair loss indexes the embedding (``e[pairs[0]] - e[pairs[1]]``,
    trkx.embedding.pairs.hinge_loss): the backward of ``e[index]`` is
    ``index_put_(accumulate=True)``, which on the CPU adds with atomics across threads, so the
    order of the sums into one row changes from run to run. Here every row receives ~6,000
    rows of 400,000 (high contention): with 2 threads and torch's default kernels 30 of 30
    passes gave another gradient (22 of 30 at the embedding's own sizes, 1,200 hits and 60,000
    pairs); with the training's deterministic kernels none does."""
    generator = torch.Generator().manual_seed(0)
    embedding = torch.randn(64, 12, generator=generator, requires_grad=True)
    index = torch.randint(0, 64, (400_000,), generator=generator)
    weight = torch.randn(400_000, 12, generator=generator)

    def gradient() -> torch.Tensor:
        embedding.grad = None
        (embedding[index] * weight).sum().backward()
        return embedding.grad.clone()

    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with deterministic_algorithms():
            first = gradient()
            assert all(torch.equal(first, gradient()) for _ in range(30))
    finally:
        torch.set_num_threads(previous)


@pytest.mark.slow
def test_two_work_folders_give_the_same_run(tmp_path: Path) -> None:
    """The tiny recipe of tests/test_pipeline_run.py twice, in two work folders, at the same
    thread count (runs repeat at one thread count: docs/design.md, "Reproducibility"): the
    same weights, working points, graphs and tracks (no path, listing order or time enters).
    Both runs are made here: the shared run may have been made at another count."""
    from tests.test_pipeline_run import tiny_config
    from trkx.cli import main as trkx_main
    from trkx.data.record import load_record

    config = tiny_config(tmp_path)
    first, second = tmp_path / "once", tmp_path / "again"
    previous = torch.get_num_threads()
    try:
        for workdir in (first, second):
            assert trkx_main(["--threads", "2", "run", str(config), "--workdir",
                              str(workdir)]) == 0
    finally:
        torch.set_num_threads(previous)
    for stage in ("embedding", "filter", "gnn"):
        a, b = (load_checkpoint(w / "checkpoints" / f"{stage}.pt", stage)
                for w in (first, second))
        assert a.state_dict.keys() == b.state_dict.keys()
        assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict), stage
        assert a.working_point == b.working_point, stage
        scores = [load_record(w / "graphs" / "test" / stage / "event000300000.pt")
                  for w in (first, second)]
        assert torch.equal(scores[0].edge_index, scores[1].edge_index), stage
    tracks = "tracks/event000300000-tracks.csv"
    assert (first / tracks).read_bytes() == (second / tracks).read_bytes()
    metrics = [json.loads((w / "evaluate" / "metrics.json").read_text())["overall"]
               for w in (first, second)]
    assert metrics[0] == metrics[1]
