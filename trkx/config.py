"""YAML configs that map one-to-one onto constructor arguments.

A config file is a mapping read with ``yaml.safe_load``. Each section maps onto the keyword
arguments of one class or function; :func:`instantiate` checks every key against the callable's
signature *before any work starts* and names an unknown or missing key (with a spelling hint),
or a value whose type does not fit the parameter's annotation (else its default's type): a
string where an int is expected fails naming the key, not deep inside the code. Command-line
overrides ``key=value`` or ``section.key=value`` are parsed as YAML scalars.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from trkx.words import with_article

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the file and the key.

    Errors about one mapping's keys also carry ``label`` (what the message calls the mapping,
    e.g. ``configs/gnn.yaml: model``), ``key`` (None when the constructor refused the values)
    and ``problem`` (the message without the label), so :func:`naming_overrides` can name the
    ``--set`` that caused them.
    """

    def __init__(self, message: str, *, label: str | None = None, key: str | None = None,
                 problem: str | None = None) -> None:
        super().__init__(message)
        self.label, self.key, self.problem = label, key, problem


INCLUDE = "include"


def load_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML mapping (``safe_load``: no arbitrary objects).

    A top-level ``include: FILE`` (or a list of files; paths relative to this file) is read
    first and this file's keys are merged over it, section by section:

        load(F) = merge(load(include_1), ..., load(include_n), F without ``include``)

    where ``merge`` combines mappings recursively and a later value replaces an earlier one.
    This is how the stage configs share one ``trainer`` block (configs/trainer.yaml).
    """
    return _load(Path(path), ())


def config_files(path: str | os.PathLike) -> list[Path]:
    """``path`` and every file it includes, recursively (what a config's meaning depends on)."""
    path = Path(path)
    files = [path]
    for name in _includes(_read_mapping(path), path):
        files += config_files(path.parent / name)
    return files


#: Parsed config files, by (resolved path, modification time, size): a file is parsed once per
#: process while it is unchanged; every reader gets its own deep copy.
_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}


def _read_mapping(path: Path) -> dict[str, Any]:
    from trkx.files.read_once import file_bytes

    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        try:
            content = yaml.safe_load(file_bytes(path).decode("utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
        if content is None:
            content = {}
        if not isinstance(content, dict):
            raise ConfigError(f"{path}: a config must be a mapping of keys to values")
        _PARSED[key] = content
    return copy.deepcopy(_PARSED[key])


def _includes(content: dict[str, Any], path: Path) -> list[str]:
    names = content.get(INCLUDE) or []
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{path}: {INCLUDE}: expected a file name or a list of them")
    return names


def _load(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    content = _read_mapping(path)
    merged: dict[str, Any] = {}
    for name in _includes(content, path):
        included = path.parent / name
        if included.resolve() in chain or included.resolve() == path.resolve():
            raise ConfigError(f"{path}: {INCLUDE}: {name} includes itself")
        if not included.is_file():
            raise ConfigError(f"{path}: {INCLUDE}: no such config file {included}")
        merged = _merge(merged, _load(included, (*chain, path.resolve())))
    return _merge(merged, {k: v for k, v in content.items() if k != INCLUDE})


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` merged over it (mappings recursively, other values replaced)."""
    result = _deep_copy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = _deep_copy(value)
    return result


def apply_overrides(config: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``config`` with ``a.b.c=value`` overrides applied (values as YAML)."""
    result = _deep_copy(config)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = result
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {part!r} is not a section")
            node = child
        try:
            node[parts[-1]] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: bad value ({exc})") from exc
    return result


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def check_keys(target: Callable[..., Any], mapping: Mapping[str, Any], label: str,
               provided: Iterable[str] = ()) -> None:
    """Raise :class:`ConfigError` for keys ``target`` does not accept, required ones missing or
    values of the wrong type; ``provided`` names arguments the code supplies (not config)."""
    signature = inspect.signature(target)
    params = {name: p for name, p in signature.parameters.items()
              if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    accepts_any = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    for key in mapping:
        if key not in params and not accepts_any:
            close = difflib.get_close_matches(str(key), list(params), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problem = f"unknown key {key!r}{hint}; valid keys: {', '.join(params)}"
            raise ConfigError(f"{label}: {problem}", label=label, key=str(key), problem=problem)
    missing = [name for name, p in params.items()
               if p.default is inspect.Parameter.empty and name not in mapping
               and name not in provided]
    if missing:
        raise ConfigError(f"{label}: missing required key(s) {', '.join(missing)}")
    hints = _type_hints(target)
    for key, value in mapping.items():
        if key not in params:
            continue
        hint = hints.get(key, _default_type(params[key].default))
        if hint is not None and not value_fits(value, hint):
            problem = (f"key {key!r} must be {describe_type(hint)}, got {value!r} "
                       f"({type(value).__name__})")
            raise ConfigError(f"{label}: {problem}", label=label, key=key, problem=problem)


def _type_hints(target: Callable[..., Any]) -> dict[str, Any]:
    """Resolved annotations of ``target``'s parameters ({} when they cannot be resolved)."""
    function = target.__init__ if inspect.isclass(target) else target
    try:
        return typing.get_type_hints(function)
    except Exception:  # unresolvable forward references: fall back to the defaults' types
        return {}


def _default_type(default: Any) -> Any:
    if isinstance(default, (bool, int, float, str)):
        return type(default)
    return None


def value_fits(value: Any, hint: Any) -> bool:
    """Whether a config value (YAML scalar, list or mapping) fits the annotation ``hint``."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(value_fits(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (Path, os.PathLike):
        return isinstance(value, (str, os.PathLike))
    if origin in (list, tuple, typing.Sequence, Iterable):
        return isinstance(value, (list, tuple))
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return isinstance(value, dict)
    if inspect.isclass(hint):
        return isinstance(value, hint)
    return True


def describe_type(hint: Any) -> str:
    """``an int``, ``a float or null`` ... for error messages."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "null"
    names = {bool: "true/false", int: "an int", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    return with_article(getattr(origin or hint, "__name__", str(hint)))


def instantiate(target: Callable[..., T], mapping: Mapping[str, Any] | None, label: str) -> T:
    """``target(**mapping)`` after :func:`check_keys`; constructor errors name ``label``."""
    mapping = dict(mapping or {})
    check_keys(target, mapping, label)
    try:
        return target(**mapping)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: {exc}", label=label, problem=str(exc)) from exc


def blamed_override(error: ConfigError, overrides: Iterable[str], label: str) -> str | None:
    """The ``KEY=VALUE`` override behind ``error``, an error about the config called
    ``label`` (or one of its sections, ``label: a.b``), or None when the file is to blame.

    A key error names its key; a constructor's refusal (e.g. "pileup must be positive") is
    put on the one override of that section whose key it mentions, if exactly one does.
    """
    if error.problem is None or error.label is None:
        return None
    if error.label == label:
        scope = ""
    elif error.label.startswith(f"{label}: "):
        scope = error.label[len(label) + 2:]
    else:
        return None
    last = {item.split("=", 1)[0].strip(): item for item in overrides}   # later ones win
    found = []
    for key, item in last.items():
        if error.key is not None:
            full = f"{scope}.{error.key}" if scope else error.key
            if key == full or key.startswith(f"{full}."):     # the key, or inside it
                found.append(item)
            continue
        parent, _, name = key.rpartition(".")
        if parent == scope and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)",
                                         error.problem):
            found.append(item)
    if error.key is not None:
        return found[-1] if found else None
    return found[0] if len(found) == 1 else None


@contextlib.contextmanager
def naming_overrides(overrides: Iterable[str], label: str) -> Iterator[None]:
    """Re-raise a :class:`ConfigError` about a value an override set (see
    :func:`blamed_override`) as ``--set KEY=VALUE: problem``: the file is not to blame."""
    overrides = list(overrides)
    try:
        yield
    except ConfigError as exc:
        item = blamed_override(exc, overrides, label)
        if item is None:
            raise
        raise ConfigError(f"--set {item}: {exc.problem}") from exc


def section(config: Mapping[str, Any], name: str, label: str) -> dict[str, Any]:
    """``config[name]`` as a mapping (empty when absent)."""
    value = config.get(name, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        problem = f"section {name!r} must be a mapping"
        raise ConfigError(f"{label}: {problem}", label=label, key=name, problem=problem)
    return dict(value)


def check_sections(config: Mapping[str, Any], allowed: Iterable[str], label: str) -> None:
    """Fail on top-level keys outside ``allowed`` (with a spelling hint)."""
    allowed = list(allowed)
    for key in config:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problem = f"unknown section {key!r}{hint}; valid sections: {', '.join(allowed)}"
            raise ConfigError(f"{label}: {problem}", label=label, key=str(key), problem=problem)
