"""Track building as a stage: its config (``tracks.yaml``) and the tuned config it leads to.

A tracks config has the sections

    builder   the track builder's keys (trkx.tracks.builder.building.TrackBuilder)
    metrics   how tracks are counted (trkx.tracks.evaluate.metrics.MetricCuts)
    tune      how ``trkx tune-tracks`` chooses the working point (trkx.tracks.tune.tune_tracks)
    tuned     what the tuning measured on the validation events (written by it, read by no one)

A recipe's tracks config (``configs/tracks.yaml``) leaves the keys the tuner chooses null
(:data:`TUNED_KEYS`: the walk cut, the lengths, the quality cuts, the second pass).
``trkx tune-tracks`` writes the **tuned config**: every builder key with the value the builder
runs with, and each quality model as a JSON file of its own beside it (``builder.quality:
quality.json``; trkx.tracks.fit.quality.QualityModel.as_dict). A shipped set's ``tracks.yaml``
is a tuned config; ``trkx infer`` takes the one in the checkpoint folder
(trkx.pipeline.inference), ``trkx build-tracks`` and ``trkx evaluate`` the one given with
``--config``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from trkx.config import ConfigError, apply_overrides, instantiate, load_config, section
from trkx.files.read_once import file_bytes
from trkx.stage_names import TUNED_TRACKS
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.fit.quality import QualityModel

#: The sections of a tracks config.
TRACKS_SECTIONS: tuple[str, ...] = ("builder", "metrics", "tune", "tuned")
#: The builder keys that name a quality model's file, and the file each is written to.
MODEL_FILES: dict[str, str] = {"quality": "quality.json", "short_quality": "short_quality.json",
                               "second_quality": "second_quality.json"}
#: The builder keys ``trkx tune-tracks`` chooses (null in a recipe's config).
TUNED_KEYS: tuple[str, ...] = ("walk_cut", "min_length", "min_length_forward", "short_score",
                               "quality_cut", "short_quality_cut", "second_cut",
                               "second_quality_cut", "second_min_hits", *MODEL_FILES)
#: Of those, the ones a builder cannot run without (the rest are off when null).
REQUIRED_KEYS: tuple[str, ...] = ("walk_cut", "min_length")
#: Each cut and the model it scores with.
MODEL_OF_CUT: dict[str, str] = {"quality_cut": "quality", "short_quality_cut": "short_quality",
                                "second_quality_cut": "second_quality"}


def tracks_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
                  ) -> dict[str, Any]:
    """The tracks config at ``path`` (none: empty) with ``--set`` overrides, its sections
    checked (an unknown one is an error naming it)."""
    label = str(path) if path else "--set"
    config = apply_overrides(load_config(path) if path else {}, list(overrides or []))
    unknown = sorted(set(config) - set(TRACKS_SECTIONS))
    if unknown:     # e.g. `--set extend_window_xy=2` would otherwise change nothing
        raise ConfigError(f"{label}: unknown key(s) {', '.join(unknown)}: a tracks config has "
                          f"the sections {', '.join(TRACKS_SECTIONS)} (--set builder.KEY=VALUE)")
    return config


def builder_values(config: Mapping[str, Any], folder: Path | None, label: str,
                   untuned: bool = False) -> dict[str, Any]:
    """The builder section of ``config`` as TrackBuilder's keyword arguments: each model key's
    file (relative to ``folder``, the config's folder) read into its QualityModel. A null
    key of :data:`REQUIRED_KEYS` is an error (tune the builder, or set it), unless
    ``untuned`` (the tuner's own base, whose tuned keys it chooses); a cut set without its
    model is an error naming both."""
    values = dict(section(config, "builder", label))
    where = f"{label}: builder"
    for key, default in MODEL_FILES.items():
        name = values.get(key)
        if name is None:
            continue
        if not isinstance(name, str):
            raise ConfigError(f"{where}.{key}: expected the name of a JSON file (e.g. "
                              f"{default}), got {name!r}")
        path = (folder or Path(".")) / name
        try:
            values[key] = QualityModel.from_dict(json.loads(file_bytes(path)), str(path))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file (named by {where}.{key})") from None
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: not a quality model ({exc})") from None
    if untuned:
        return {key: value for key, value in values.items() if key not in TUNED_KEYS}
    missing = [key for key in REQUIRED_KEYS if key in values and values[key] is None
               and not (key == "walk_cut" and values.get("method") == "components")]
    if missing:
        raise ConfigError(f"{where}.{missing[0]} is null: tune the builder on validation events "
                          "(`trkx tune-tracks`) and give the tuned tracks.yaml, or set a value")
    for cut, model in MODEL_OF_CUT.items():
        if values.get(cut) is not None and values.get(model) is None:
            raise ConfigError(f"{where}.{cut} is set but {where}.{model} names no model file")
    return {key: value for key, value in values.items() if value is not None
            or key not in _NOT_NULLABLE}


def _not_nullable() -> frozenset[str]:
    """Builder keys whose default is a value, not None (null in a config: the default)."""
    return frozenset(f.name for f in fields(TrackBuilder) if f.default is not None)


_NOT_NULLABLE = _not_nullable()


def track_builder(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
                  ) -> TrackBuilder:
    """The TrackBuilder of the tracks config at ``path`` (a tuned one, or a recipe's with its
    tuned keys set) with ``--set`` overrides."""
    label = str(path) if path else "--set"
    config = tracks_config(path, overrides)
    folder = Path(path).parent if path else None
    return instantiate(TrackBuilder, builder_values(config, folder, label), f"{label}: builder")


def tuned_config_text(builder: TrackBuilder, config: Mapping[str, Any],
                      figures: Mapping[str, float], source: str) -> str:
    """The tuned tracks config (YAML) of ``builder``: every builder key, the model keys as
    their file names (:data:`MODEL_FILES`); ``config``'s ``metrics`` and ``tune`` sections
    as they were; ``figures`` (the validation figures) under ``tuned``."""
    values: dict[str, Any] = {}
    for f in fields(TrackBuilder):
        value = getattr(builder, f.name)
        if f.name in MODEL_FILES:
            value = MODEL_FILES[f.name] if value is not None else None
        values[f.name] = value
    content = {"builder": values,
               "metrics": dict(config.get("metrics") or {}),
               "tune": dict(config.get("tune") or {}),
               "tuned": {key: float(value) for key, value in figures.items()}}
    words = (f"The track builder's working point, chosen on validation events ({source}): "
             "every value the builder runs with; the quality models in the JSON files named "
             "here.")
    header = "".join(f"# {line}\n" for line in textwrap.wrap(words, 96))
    return header + yaml.safe_dump(content, sort_keys=False)


def write_tuned_config(folder: Path, builder: TrackBuilder, config: Mapping[str, Any],
                       figures: Mapping[str, float], source: str) -> Path:
    """Write the tuned config ``folder/tracks.yaml`` and its models' files (each to a
    temporary file, then renamed; a model file of an earlier tuning that this one has no
    model for is removed); returns the config's path."""
    from trkx.files.atomic import atomic_write

    folder.mkdir(parents=True, exist_ok=True)
    for key, name in MODEL_FILES.items():
        model = getattr(builder, key)
        if model is None:
            (folder / name).unlink(missing_ok=True)
            continue
        text = json.dumps(model.as_dict(), indent=1) + "\n"
        atomic_write(folder / name, lambda tmp, t=text: Path(tmp).write_text(t))
    text = tuned_config_text(builder, config, figures, source)
    return atomic_write(folder / TUNED_TRACKS, lambda tmp: Path(tmp).write_text(text))


def model_files(path: Path) -> list[str]:
    """The quality-model files a tuned config names (file names, relative to its folder)."""
    builder = section(load_config(path), "builder", str(path))
    return [builder[key] for key in MODEL_FILES if isinstance(builder.get(key), str)]
