"""Graph-parallel training under torchrun: the gnn stage's own Lightning training, one strategy
changed.

    torchrun --nproc-per-node P -m trkx train gnn --config configs/gnn_distributed.yaml

The config is ``configs/gnn.yaml`` plus a ``distributed`` section, the constructor arguments of
:class:`~.lightning.GraphParallelStrategy` (``algorithm``, ``partitioner``, ``replication``,
``timeout_s``). Training runs through :func:`trkx.training.fit_stage` exactly as on one
process (same keys; validation, ``max_time``, ``last.ckpt`` / ``best.ckpt``, resume with
optimiser, scheduler and step, seeding) with three differences made here:

- the Trainer's ``devices`` is torchrun's ``LOCAL_WORLD_SIZE`` (the launcher decides the
  processes; ``trainer.devices`` of the config is ignored) and the strategy takes its node
  count from ``WORLD_SIZE / LOCAL_WORLD_SIZE``;
- ``strategy`` is the ``GraphParallelStrategy`` of the ``distributed`` section: every rank gets
  every event, keeps its block, and the loss, gradients and validation figures are the
  single-process ones;
- a collective that times out (a stopped, dead or far slower rank) ends this rank with one line
  naming ``distributed.timeout_s`` (:class:`PeerTimeout`); torchrun then stops the others.

Keys that cannot act on a rank's block are refused by :func:`check_config` (one line, exit 2)
rather than ignored: ``module.graph_ops`` other than ``csr``/``auto``,
``module.signal_pt_power > 0`` and a ``sampling`` section. Without torchrun the entry
refuses to start (:func:`require_torchrun`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from trkx.config import ConfigError
from trkx.training.fit import StageFailed

TORCHRUN_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT")


class PeerTimeout(StageFailed):
    """A collective waited longer than ``distributed.timeout_s`` for another rank."""


def require_torchrun(label: str) -> None:
    """One line naming the command when the process was not started by torchrun."""
    missing = [name for name in TORCHRUN_ENV if name not in os.environ]
    if missing:
        raise ConfigError(f"{label}: the 'distributed' section trains graph-parallel and must "
                          "run under torchrun (missing " + ", ".join(missing) + "): torchrun "
                          f"--nproc-per-node P -m trkx train gnn --config {label}")


def check_section(section: dict[str, Any], label: str) -> None:
    """Keys and values of the ``distributed`` section, and the world size it needs when
    torchrun's ``WORLD_SIZE`` is known (``1.5d`` needs ``P`` divisible by ``c^2``)."""
    from trkx.config import check_keys

    from . import ALGORITHMS, PARTITIONERS
    from .lightning import GraphParallelStrategy

    where = f"{label}: distributed"
    check_keys(GraphParallelStrategy, section, where)
    algorithm = section.get("algorithm", "sparse-1d")
    partitioner = section.get("partitioner", "balanced")
    replication = section.get("replication", 1)
    timeout = section.get("timeout_s", 60.0)
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"{where}.algorithm: {algorithm!r} is not one of "
                          f"{', '.join(ALGORITHMS)}")
    if partitioner not in PARTITIONERS:
        raise ConfigError(f"{where}.partitioner: {partitioner!r} is not one of "
                          f"{', '.join(PARTITIONERS)}")
    if not isinstance(replication, int) or replication < 1:
        raise ConfigError(f"{where}.replication: must be an integer >= 1, got {replication!r}")
    if algorithm != "1.5d" and replication != 1:
        raise ConfigError(f"{where}.replication: {replication} needs algorithm 1.5d")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"{where}.timeout_s: must be a number > 0, got {timeout!r}")
    overlap = section.get("overlap", True)     # its type: check_keys
    if not overlap and algorithm != "sparse-1d":
        raise ConfigError(f"{where}.overlap: false is a switch of sparse-1d (the halo exchange "
                          f"of {algorithm} does not overlap)")
    world = os.environ.get("WORLD_SIZE")
    if world is not None and int(world) % (replication * replication):
        raise ConfigError(f"{where}.replication: c={replication} needs the number of processes "
                          f"divisible by c^2 = {replication * replication}, torchrun started "
                          f"{world}")


LOCAL_KERNELS = ("csr", "auto")   # a block's local products are CSR (trkx.gnn.local_ops)


def check_config(config: dict[str, Any], label: str) -> None:
    """The ``distributed`` section (:func:`check_section`) and the keys of the other sections
    that cannot act on graph-parallel blocks: ``module.graph_ops`` must be ``csr`` or ``auto``
    (both run the CSR incidence kernels per block), ``module.signal_pt_power`` must
    be 0, ``module.secondary_weight`` 1 and
    ``module.signal_pt_min`` null (a block has no hit pT, production radius or particle hit
    count), ``module.z_shift_sigma`` 0 (a block's edge inputs are
    computed beforehand), and no
    ``sampling`` section."""
    check_section(dict(config.get("distributed") or {}), label)
    module = dict(config.get("module") or {})
    graph_ops = module.get("graph_ops", "auto")
    if graph_ops not in LOCAL_KERNELS:
        raise ConfigError(f"{label}: module.graph_ops: {graph_ops!r} with a 'distributed' "
                          "section: graph-parallel blocks use the CSR kernels, set csr or auto")
    if float(module.get("signal_pt_power", 0.0) or 0.0) > 0:
        raise ConfigError(f"{label}: module.signal_pt_power > 0 with a 'distributed' section: "
                          "the pT weights need each edge's hit pT, which a block does not "
                          "carry; set 0")
    if float(module.get("secondary_weight", 1.0) or 1.0) != 1.0:
        raise ConfigError(f"{label}: module.secondary_weight with a 'distributed' section: the "
                          "secondary weights need each edge's production radius, which a block "
                          "does not carry; set 1")
    if module.get("signal_pt_min") is not None:
        raise ConfigError(f"{label}: module.signal_pt_min with a 'distributed' section: the "
                          "loss's own signal threshold needs each edge's hit pT, which a block "
                          "does not carry; set null")
    if float(module.get("z_shift_sigma", 0.0) or 0.0) > 0:
        raise ConfigError(f"{label}: module.z_shift_sigma with a 'distributed' section: a block's "
                          "edge inputs are computed before the step could move its hits; set 0")
    if config.get("sampling") is not None:
        raise ConfigError(f"{label}: 'sampling' and 'distributed' sections together: sampled "
                          "subgraphs train data-parallel, whole graphs graph-parallel; keep one")


def _timed_out(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text


def graph_parallel_fit(section: dict[str, Any], label: str) -> Callable[..., Any]:
    """``fit_stage`` with the graph-parallel strategy of ``section`` (module docstring): call it
    with fit_stage's arguments."""
    from trkx.training import fit_stage

    from .lightning import GraphParallelStrategy

    require_torchrun(label)
    check_section(section, label)   # also checked with the whole config by check_config

    def fit(*args: Any, options, **kwargs: Any):
        local = int(os.environ["LOCAL_WORLD_SIZE"])
        options = replace(options, devices=local)
        strategy = GraphParallelStrategy(**section)
        try:
            result = fit_stage(*args, options=options, strategy=strategy, **kwargs)
        except Exception as exc:
            if not _timed_out(exc):
                raise
            rank = os.environ.get("RANK", "?")
            timeout = strategy.graph_settings["timeout_s"]
            raise PeerTimeout(f"{label}: rank {rank} waited more than distributed.timeout_s="
                              f"{timeout:g} s for another rank (stopped, dead or far slower); "
                              "stopping. Raise distributed.timeout_s if one step takes that "
                              "long") from exc
        close_process_group()
        return result

    return fit


def close_process_group() -> None:
    """Every rank waits for the others, then the process group (and its subgroups) is
    destroyed: gloo's worker threads are joined here, not by the interpreter's exit, where a
    rank that finished first could abort ("terminate called without an active exception")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
