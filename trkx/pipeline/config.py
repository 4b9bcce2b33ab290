"""The pipeline configuration: which events, which stage configs, which track builder.

A pipeline YAML has five sections, each mapping one-to-one onto a dataclass here:

    events:    EventPlan   - simulate train/val/test events, or use existing folders
    stages:    {embedding|filter|gnn: StagePlan}   - stage config file + overrides
    tracks:    StagePlan   - configs/tracks.yaml (builder, metrics) + overrides
    inference: InferencePlan - options of `trkx infer` (e.g. the precision)
    state:     StatePlan   - optional: the committed training state the recipe resumes from

Stage config paths are relative to the pipeline file's folder. Every key is checked before any
work starts; a bad key fails with a message that names it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trkx.config import (
    ConfigError,
    apply_overrides,
    check_sections,
    instantiate,
    load_config,
    naming_overrides,
    section,
)
from trkx.data.simulate.fitted_spectra import FIT
from trkx.stage_names import LEARNED_STAGES

#: sigma_z (mm) of the later release of the real data (event 21001: 52, the sample event: 56,
#: spread of their primary-vertex z positions), the second length of the default event mix.
LATER_RELEASE_SIGMA_Z = 50.0
STAGE_NAMES = LEARNED_STAGES
SECTIONS: tuple[str, ...] = ("events", "stages", "tracks", "inference", "state")


@dataclass(frozen=True)
class EventPlan:
    """Where the events come from: simulated (default) or existing folders.

    With ``simulate`` true, ``train_events + val_events + test_events`` events are simulated at
    pile-up ``pileup`` from ``seed``, primary vertices spread by ``vertex_sigma_z`` mm along the
    beam (``trkx simulate --vertex-sigma-z``; a list is cycled over the event ids), in the
    magnetic field ``field_map`` (``trkx simulate --field-map``: ``uniform`` 2 T, or
    ``solenoid``, falling off along the beam as the real events' field does), through
    ``support_fraction`` of material beside the silicon losing ``energy_loss`` MeV per mm
    of it (``trkx simulate --support-fraction``, ``--energy-loss``; 5.9 and 1.2 are the fit to the
    real sample event's tracks, :mod:`trkx.data.simulate.physics`). The default
    alternates the two releases of the real data: the Kaggle training events (5.49 mm, the
    simulator's fit) and the later release of the sample event and event 21001 (~50 mm).
    Otherwise ``train_dir``, ``val_dir`` and ``test_dir`` (TrackML event folders) are used as
    they are (``TRKX_DATA`` expands in them). All three need truth and particle files (the test
    events are evaluated) and cells files when the embedding uses cell features:
    :mod:`trkx.pipeline.preflight` checks them before any step.
    """

    simulate: bool = True
    train_events: int = 20
    val_events: int = 2
    test_events: int = 5
    pileup: float = 20.0
    seed: int = 1
    workers: int = 1
    vertex_sigma_z: list[float] | float = field(
        default_factory=lambda: [FIT["vertex_sigma_z"], LATER_RELEASE_SIGMA_Z])
    field_map: str = "uniform"
    support_fraction: float = 1.0
    energy_loss: float = 0.0
    train_dir: str | None = None
    val_dir: str | None = None
    test_dir: str | None = None

    def __post_init__(self) -> None:
        from trkx.data.simulate.physics import PhysicsConfig

        # the simulator's own checks (field map, material)
        PhysicsConfig(field_map=self.field_map, support_fraction=self.support_fraction,
                      energy_loss=self.energy_loss)
        if self.simulate:
            for name in ("train_events", "val_events", "test_events"):
                if getattr(self, name) < 1:
                    raise ValueError(f"{name} must be at least 1")
            if self.pileup <= 0:
                raise ValueError("pileup must be positive")
            value = self.vertex_sigma_z
            lengths = list(value) if isinstance(value, (list, tuple)) else [value]
            if not lengths or not all(isinstance(s, (int, float)) and not isinstance(s, bool)
                                      and math.isfinite(s) and s > 0 for s in lengths):
                raise ValueError("vertex_sigma_z must be a positive length in mm or a list of "
                                 f"them, got {value!r}")
        elif not (self.train_dir and self.val_dir and self.test_dir):
            raise ValueError("with simulate: false, train_dir, val_dir and test_dir are needed")

    def sigma_z_arg(self) -> str:
        """The ``--vertex-sigma-z`` value of ``trkx simulate``, e.g. ``5.49,50.0``."""
        value = self.vertex_sigma_z
        return ",".join(str(float(s)) for s in (value if isinstance(value, (list, tuple))
                                                 else [value]))


@dataclass(frozen=True)
class StagePlan:
    """One stage: its YAML config (relative to the pipeline file) and ``KEY=VALUE`` overrides."""

    config: str
    overrides: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InferencePlan:
    """Options of pipeline inference, applied to every stage's ``inference`` section (they
    replace the stage configs' values there): the precision of the dense layers of the three
    learned stages (trkx.runtime.precision) and the GNN's local kernel; and whether the
    filter's and the GNN's MLPs run fused on the CPU (trkx.runtime.fused_mlp)."""

    precision: str = "fp32"     # fp32 | bf16
    graph_ops: str = "csr"      # csr | scatter | auto (auto: timed on the host)
    fused: bool = True          # the fused CPU MLP kernels (trkx.runtime.fused_mlp); false: plain

    def stage_overrides(self, stage: str) -> list[str]:
        """The ``KEY=VALUE`` overrides these options make in ``stage``'s config."""
        overrides = [f"inference.precision={self.precision}"]
        if stage == "gnn":
            overrides.append(f"inference.graph_ops={self.graph_ops}")
        return overrides

    def __post_init__(self) -> None:
        from trkx.gnn.ops_factory import GRAPH_OPS_CHOICES
        from trkx.runtime.precision import check_precision

        check_precision(self.precision)
        if not isinstance(self.fused, bool):
            raise ValueError(f"fused must be true or false, not {self.fused!r}")
        if self.graph_ops not in GRAPH_OPS_CHOICES:
            raise ValueError(f"graph_ops must be one of {', '.join(GRAPH_OPS_CHOICES)}, not "
                             f"{self.graph_ops!r}")


@dataclass(frozen=True)
class StatePlan:
    """Where the recipe keeps its resumable training state (trkx.pipeline.state): ``folder``
    relative to the pipeline file, e.g. ``../state/pu200_far`` (None: no stored state)."""

    folder: str | None = None


@dataclass(frozen=True)
class PipelineConfig:
    path: Path
    events: EventPlan
    stages: dict[str, StagePlan]
    tracks: StagePlan
    inference: InferencePlan
    overrides: tuple[str, ...] = ()     # the --set overrides this config was loaded with
    state: StatePlan = field(default_factory=StatePlan)

    def stage_config_path(self, plan: StagePlan) -> Path:
        return resolve_relative(plan.config, self.path.parent)

    def stage_configs(self) -> dict[str, tuple[Path, list[str]]]:
        """``stage -> (YAML, overrides)`` of pipeline inference: each learned stage's plan with
        the ``inference`` options appended, and the tracks plan."""
        configs = {name: (self.stage_config_path(plan),
                          [*plan.overrides, *self.inference.stage_overrides(name)])
                   for name, plan in self.stages.items()}
        configs["tracks"] = (self.stage_config_path(self.tracks), list(self.tracks.overrides))
        return configs


def resolve_relative(path: str, base: Path) -> Path:
    """``path`` with ``$TRKX_DATA``/``~`` expanded, relative to ``base`` unless absolute; a
    ``$TRKX_DATA`` that is not set is an error saying so (``make`` sets it, nothing else)."""
    if re.search(r"\$(\{)?TRKX_DATA\b", path) and not os.environ.get("TRKX_DATA"):
        raise ConfigError(f"{path}: $TRKX_DATA is not set (export TRKX_DATA=<folder holding the "
                          "TrackML data>, e.g. ../shared/data/trackml beside the checkout)")
    expanded = Path(os.path.expanduser(os.path.expandvars(path)))
    # configs/recipes/../gnn.yaml -> configs/gnn.yaml (a recipe names the stage configs beside it)
    return expanded if expanded.is_absolute() else Path(os.path.normpath(base / expanded))


def _stage_plan(value: Any, label: str) -> StagePlan:
    if not isinstance(value, dict):
        raise ConfigError(f"{label}: expected a mapping with 'config' and 'overrides'")
    plan = instantiate(StagePlan, value, label)
    if not isinstance(plan.overrides, list) or not all(isinstance(o, str) and "=" in o
                                                       for o in plan.overrides):
        raise ConfigError(f"{label}: overrides must be a list of 'KEY=VALUE' strings")
    return plan


def load_pipeline_config(path: str | os.PathLike, overrides: list[str] | None = None,
                         ) -> PipelineConfig:
    """Read and check a pipeline YAML (and the stage configs it names exist)."""
    path = Path(path)
    label = str(path)
    raw = apply_overrides(load_config(path), overrides or [])
    with naming_overrides(overrides or [], label):
        return _pipeline_config(path, raw, label, tuple(overrides or []))


def _pipeline_config(path: Path, raw: dict[str, Any], label: str,
                     overrides: tuple[str, ...]) -> PipelineConfig:
    check_sections(raw, SECTIONS, label)
    events = instantiate(EventPlan, section(raw, "events", label), f"{label}: events")
    stage_section = section(raw, "stages", label)
    check_sections(stage_section, STAGE_NAMES, f"{label}: stages")
    missing = [name for name in STAGE_NAMES if name not in stage_section]
    if missing:
        raise ConfigError(f"{label}: stages: missing {', '.join(missing)}")
    stages = {name: _stage_plan(stage_section[name], f"{label}: stages.{name}")
              for name in STAGE_NAMES}
    tracks = _stage_plan(section(raw, "tracks", label), f"{label}: tracks")
    inference = instantiate(InferencePlan, section(raw, "inference", label),
                            f"{label}: inference")
    state = instantiate(StatePlan, section(raw, "state", label), f"{label}: state")
    config = PipelineConfig(path, events, stages, tracks, inference, overrides, state)
    for name, plan in [*stages.items(), ("tracks", tracks)]:
        stage_path = config.stage_config_path(plan)
        if not stage_path.is_file():
            raise ConfigError(f"{label}: {name}.config: no such file {stage_path}")
        load_config(stage_path)  # valid YAML mapping
    return config
