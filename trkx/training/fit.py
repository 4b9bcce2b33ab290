"""``fit_stage``: train one stage and export its best weights as a trkx checkpoint.

    seed (pl.seed_everything(seed, workers=True)) -> deterministic kernels (trainer.deterministic)
    -> build the LightningModule
    -> a fresh run with ``init_from``: the network starts from that model file's weights
    -> Trainer.fit (resuming RUN/last.ckpt when the same config wrote it)
    -> load RUN/best.ckpt (best validation ``monitor``; the last weights when no validation
       ran) -> validate those weights once
    -> module.working_point() if defined -> refuse a stage that keeps ~no signal edges
    -> trkx.files.checkpoint.save_checkpoint(constructor, weights, working point, config, metrics)

The run folder ``RUN`` sits beside the model file: ``runs/filter.pt`` trains in
``runs/filter.run/`` (``config.json``, ``last.ckpt``, ``best.ckpt``, ``logs/``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trkx.training.options import BUDGET_KEYS, KERNEL_KEYS, WORKING_POINT_KEYS, TrainerOptions
from trkx.training.trainer import BEST, LAST, MemoryLimitSignal, build_trainer


class StageFailed(RuntimeError):
    """Training finished but the stage is unusable (one line naming the metric and a hint)."""


class MemoryLimitReached(StageFailed):
    """The run passed ``trainer.max_memory_gb`` and stopped with a resumable ``last.ckpt``."""


@dataclass(frozen=True)
class FitResult:
    module: Any
    checkpoint: Path
    metrics: dict[str, float]
    working_point: dict[str, float]
    global_step: int
    resumed_from: int | None


def run_folder(checkpoint: str | Path) -> Path:
    """Where a stage trains: the model file's name with ``.run`` in place of its suffix."""
    return Path(checkpoint).with_suffix(".run")


def _resume_key(config: Mapping[str, Any]) -> str:
    """The config without the keys a resumed run may change (budgets, logging, paths out,
    working-point choices, kernels, inference settings), its data folders resolved (a run
    given ``runs/x``, one given the same folder as ``/abs/runs/x`` and one reaching it through
    a link, say from another checkout whose ``runs`` links here, are the same run)."""
    kept = {k: v for k, v in config.items() if k not in ("checkpoint", "inference")}
    if isinstance(kept.get("data"), dict):
        kept["data"] = {k: os.path.realpath(v) if k.endswith("_dir") and isinstance(v, str)
                        and v else v for k, v in kept["data"].items()}
    trainer = {k: v for k, v in dict(kept.get("trainer") or {}).items() if k not in BUDGET_KEYS}
    module = {k: v for k, v in dict(kept.get("module") or {}).items()
              if k not in WORKING_POINT_KEYS | KERNEL_KEYS}
    if isinstance(module.get("teacher"), str):   # the model file's content, not its place
        module["teacher"] = _file_identity(module["teacher"])
    elif module.get("teacher", None) is None:    # no teacher: its share means nothing (and
        module.pop("teacher", None)              # runs stored before distillation resume)
        module.pop("distill_weight", None)
    if not module.get("focal_gamma"):            # off: as runs stored before the factor was
        module.pop("focal_gamma", None)          # a key (they resume)
    return json.dumps({**kept, "trainer": trainer, "module": module}, sort_keys=True,
                      default=str)


def _file_identity(path: str) -> str:
    """``sha256:<hex>`` of the file at ``path`` (so a clone elsewhere resumes the same run);
    the string itself when it names no file (a key stored that way already)."""
    import hashlib

    if not os.path.isfile(path):
        return path
    with open(path, "rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


def _same_run(saved: str, config: Mapping[str, Any]) -> bool:
    """Whether the stored resume key ``saved`` is that of ``config``. The stored key is
    filtered again with today's key sets, so a key that a later trkx counts as a budget (say)
    does not orphan runs saved before."""
    try:
        stored = json.loads(saved)
    except json.JSONDecodeError:
        return False
    return isinstance(stored, dict) and _resume_key(stored) == _resume_key(config)


def _resume_point(run: Path, config: Mapping[str, Any], resume: bool, log) -> Path | None:
    last, saved = run / LAST, run / "config.json"
    if resume and last.is_file() and saved.is_file() and _same_run(saved.read_text(), config):
        return last
    if run.exists() and os.environ.get("RANK", "0") == "0":  # torchrun: rank 0 cleans up
        if last.is_file():   # keep the replaced run once: a config edit must not cost hours
            previous = run.with_name(f"{run.name}.previous")
            shutil.rmtree(previous, ignore_errors=True)
            run.rename(previous)
            log(f"{run}: {'config changed, ' if resume else ''}starting afresh (the replaced "
                f"run is kept in {previous})")
        else:
            shutil.rmtree(run)
    return None


def _initialise(stage: str, network: Any, path: str, log: Callable[[str], None]) -> None:
    """Load the network weights of the model file ``path`` (same stage, same constructor, or
    one whose input layers read fewer leading columns: :func:`widened_weights`)."""
    from trkx.files.checkpoint import CheckpointError, load_checkpoint

    if not Path(path).is_file():
        raise CheckpointError(f"trainer.init_from {path}: no such model file")
    source = load_checkpoint(path, stage)
    try:
        state, dropped = first_iterations(source.state_dict, network.state_dict(),
                                          getattr(network, "iteration_lists", ()))
        inner = getattr(network, "inner_input_weights", None)
        weights, widened = widened_weights(state, network.state_dict(),
                                           getattr(network, "leading_input_weights", ()),
                                           inner() if inner is not None else {})
        network.load_state_dict(weights)
    except (RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{path}: trainer.init_from does not fit this {stage} network "
                              f"({str(exc).splitlines()[0]}); give a model of the same "
                              "constructor") from exc
    log(f"{stage}: starting from the weights of {path} (trainer.init_from)")
    if dropped:
        log(f"{stage}: the model file's iterations {', '.join(map(str, dropped))} are left "
            "out: this network has fewer")
    for key in widened:
        log(f"{stage}: {key} reads {network.state_dict()[key].shape[1]} input columns, the "
            f"model file's {source.state_dict[key].shape[1]}: the new ones start at weight 0")


def first_iterations(source: Mapping[str, Any], target: Mapping[str, Any],
                     lists: Collection[str] = ()) -> tuple[dict[str, Any], list[int]]:
    """``source`` without the iterations ``target`` lacks, and their numbers.

    A network whose message passing repeats ``T`` times keeps one module per iteration in each
    of ``lists`` (the GNN's ``edge_nets.t.*``, ``node_nets.t.*``). Given a model file of ``T' >
    T`` iterations, the network starts from its encoders, its first ``T`` iterations and its
    classifier, iterations ``T .. T' - 1`` left out: a shallower GNN fine-tuned from a deeper
    one's weights instead of from scratch. A source with fewer iterations than the target is
    left as it is (its missing keys are :func:`widened_weights`' error)."""
    def iteration(key: str) -> int | None:
        head, _, rest = key.partition(".")
        number = rest.partition(".")[0]
        return int(number) if head in lists and number.isdigit() else None

    have = {iteration(key) for key in target} - {None}
    out, dropped = {}, set()
    for key, weight in source.items():
        t = iteration(key)
        if t is not None and have and t > max(have):
            dropped.add(t)
            continue
        out[key] = weight
    return out, sorted(dropped)


def widened_weights(source: Mapping[str, Any], target: Mapping[str, Any],
                    widenable: Collection[str] = (),
                    inner: Mapping[str, int] | None = None) -> tuple[dict[str, Any], list[str]]:
    """``source`` fitted to ``target``'s shapes, and the keys that were widened.

    A weight of ``widenable`` (the network's ``leading_input_weights``: Linears that read the
    LEADING columns of the input, so new columns come last) ``W`` [out, a] whose target is
    [out, b] with ``b > a`` (e.g. a GNN given the cluster shape besides the hit position)
    becomes ``W' = [W | 0]``: for any input ``x = [x_a | x_new]``, ``W' x = W x_a``, so the
    widened network computes what the source did and learns the new columns from there. A
    weight of ``inner`` (the network's ``inner_input_weights()``: key -> the number ``t`` of
    trailing input columns that keep their place, as the GNN's edge encoder reads
    ``[edge inputs, h_src, h_dst]`` with ``t = 2 hidden``) becomes ``[W_lead | 0 | W_trail]``:
    the new columns go in before the trailing ones, which again computes what the source did.
    Every other key must match in shape (a layer the network names in neither list is not
    widened); a missing, extra or otherwise different key is a ValueError naming it.
    """
    import torch

    if set(source) != set(target):
        missing = sorted(set(target) - set(source)) or sorted(set(source) - set(target))
        raise ValueError(f"the weights differ in their keys ({missing[0]})")
    out, widened = {}, []
    for key, weight in target.items():
        have = source[key]
        if tuple(have.shape) == tuple(weight.shape):
            out[key] = have
        elif (key in widenable or key in (inner or {})) and have.dim() == 2 \
                and weight.dim() == 2 and have.shape[0] == weight.shape[0] \
                and have.shape[1] < weight.shape[1]:
            trailing = (inner or {}).get(key, 0)
            if trailing > have.shape[1]:
                raise ValueError(f"{key} has {have.shape[1]} input columns in the model file, "
                                 f"fewer than its {trailing} trailing ones")
            lead = have.shape[1] - trailing
            grown = torch.zeros(tuple(weight.shape), dtype=have.dtype)
            grown[:, :lead] = have[:, :lead]
            if trailing:
                grown[:, weight.shape[1] - trailing:] = have[:, lead:]
            out[key] = grown
            widened.append(key)
        else:
            raise ValueError(f"{key} has shape {tuple(have.shape)} in the model file, "
                             f"{tuple(weight.shape)} here")
    return out, widened


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool = True) -> Iterator[None]:
    """Within the block, torch runs its deterministic kernels (warn-only: an op without one
    warns and runs as is) and leaves uninitialised memory alone (filling every ``torch.empty``
    buys nothing here: no kernel reads what it did not write); the previous settings come
    back afterwards. On CUDA cuBLAS needs a fixed workspace for that
    (``CUBLAS_WORKSPACE_CONFIG``, set when unset, as Lightning's ``deterministic`` does).
    ``enabled=False`` changes nothing."""
    import torch

    if not enabled:
        yield
        return
    deterministic = torch.utils.deterministic
    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled(),
             deterministic.fill_uninitialized_memory)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        deterministic.fill_uninitialized_memory = saved[2]


def _floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()}


def fit_stage(stage: str, build_module: Callable[[], Any], network: Callable[[Any], Any],
              constructor: Callable[[Any], dict[str, Any]], options: TrainerOptions,
              checkpoint: str | Path, config: Mapping[str, Any], *, train_loader: Any,
              val_loader: Any = None, efficiency_key: str | None = None,
              default_working_point: Callable[[Any], dict[str, float]] | None = None,
              strategy: Any = None, log: Callable[[str], None] = print) -> FitResult:
    """Train, keep the best validation weights and write ``checkpoint`` (module docstring)."""
    with deterministic_algorithms(options.deterministic):
        return _fit_stage(stage, build_module, network, constructor, options, checkpoint,
                          config, train_loader=train_loader, val_loader=val_loader,
                          efficiency_key=efficiency_key,
                          default_working_point=default_working_point, strategy=strategy,
                          log=log)


def _fit_stage(stage: str, build_module: Callable[[], Any], network: Callable[[Any], Any],
               constructor: Callable[[Any], dict[str, Any]], options: TrainerOptions,
               checkpoint: Path, config: Mapping[str, Any], *, train_loader: Any,
               val_loader: Any, efficiency_key: str | None,
               default_working_point: Callable[[Any], dict[str, float]] | None,
               strategy: Any, log: Callable[[str], None]) -> FitResult:
    import pytorch_lightning as pl
    import torch

    from trkx.files.atomic import atomic_write
    from trkx.files.checkpoint import save_checkpoint

    checkpoint = Path(checkpoint)
    run = run_folder(checkpoint)
    resume_from = _resume_point(run, config, options.resume, log)
    pl.seed_everything(options.seed, workers=True, verbose=False)
    module = build_module()
    if resume_from is None and options.init_from:
        _initialise(stage, network(module), options.init_from, log)
    elif options.init_from:
        log(f"{stage}: trainer.init_from {options.init_from} not used: the run resumes "
            f"from {resume_from}")
    validation = val_loader is not None
    trainer = build_trainer(options, run, strategy=strategy, validation=validation)
    if trainer.is_global_zero:
        atomic_write(run / "config.json", lambda tmp: tmp.write_text(_resume_key(config)))
    resumed_step = None
    if resume_from is not None:
        resumed_step = int(torch.load(resume_from, map_location="cpu",
                                      weights_only=True)["global_step"])
        log(f"{stage}: resuming {resume_from} at step {resumed_step}")
    saver = trainer.callbacks[0]
    try:
        trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader,
                    ckpt_path=str(resume_from) if resume_from else None, weights_only=True)
    except SystemExit:  # Lightning turns Ctrl-C into sys.exit(1) after saving last.ckpt
        if saver.interrupted:
            raise KeyboardInterrupt from None
        raise
    except MemoryLimitSignal as exc:   # last.ckpt written by LastCheckpoint.on_exception
        raise MemoryLimitReached(f"{stage}: {exc}") from None
    trainer.save_checkpoint(run / LAST, weights_only=False)
    metrics = _floats(trainer.callback_metrics)
    best = run / f"{BEST}.ckpt"
    if validation:  # the best validated weights, else (no validation ran yet) the last ones
        step = trainer.global_step
        if best.is_file():
            state = torch.load(best, map_location="cpu", weights_only=True)
            module.load_state_dict(state["state_dict"])
            step = state["global_step"]
        trainer.validate(module, dataloaders=val_loader, verbose=False)
        metrics = {**_floats(trainer.callback_metrics), "best_step": float(step)}
    efficiency = metrics.get(efficiency_key) if efficiency_key else None
    if validation and efficiency is not None and efficiency < options.min_signal_efficiency:
        raise StageFailed(
            f"{stage}: validation keeps {efficiency:.1%} of the signal edges ({efficiency_key} "
            f"< trainer.min_signal_efficiency={options.min_signal_efficiency}); nothing "
            f"exported: check the data and labels, or train longer (resumes from {run})")
    working_point = dict(default_working_point(module)) if default_working_point else {}
    if hasattr(module, "working_point"):
        working_point.update(module.working_point())
    if trainer.is_global_zero:
        save_checkpoint(checkpoint, stage, constructor(module), network(module).state_dict(),
                        working_point, config, metrics)
    return FitResult(module, checkpoint, metrics, working_point, int(trainer.global_step),
                     resumed_step)
