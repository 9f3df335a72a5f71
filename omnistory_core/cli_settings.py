"""A setting Hydra refuses (``layuot=grid``: "Could not override 'layuot' ... not in struct"): one
line naming what was meant, exit 2.

A parameter of a component is set under its group (``image.layout=grid``); typed bare, or
misspelt, it is not a setting of the run, and Hydra's answer is five lines of struct internals with
exit 1.  :func:`unknown_setting_line` reads the key from Hydra's message and suggests, from the
components the command line names first, then from every installed one, the parameters it
resembles (``image.layout``), and the run's own settings it resembles (``seed`` for ``sed``,
``engine.retry_failures`` for ``engine.retry_falures``, from the primary config).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

_REFUSED = re.compile(r"Could not override '(?P<key>[^']+)'")
#: how many suggestions one line names
MAX_SUGGESTIONS = 3


def refused_key(message: str) -> str | None:
    """The key of Hydra's "Could not override 'KEY'" error, or None for another error."""
    match = _REFUSED.search(message)
    return match["key"] if match and "not in struct" in message else None


def _given(key: str, argv: Sequence[str]) -> str:
    """The override as typed (``layuot=grid``), or ``KEY=...``."""
    for arg in argv:
        if arg.lstrip("+").split("=", 1)[0] == key:
            return arg
    return f"{key}=..."


def _chosen(argv: Sequence[str], groups: Iterable[str]) -> set[tuple[str, str]]:
    """The components the command line names (``image=mosaic``; a sweep's first value)."""
    out = set()
    for arg in argv:
        group, sep, value = arg.lstrip("+").partition("=")
        if sep and group in groups and value:
            out.add((group, value.split(",")[0]))
    return out


def _parameters(registry: Any) -> dict[tuple[str, str], list[str]]:
    """Each registered component's parameter names (declared, or a wrapper's own)."""
    from omnistory_core.params import IMPLICIT, declared

    implicit = {p.name for p in IMPLICIT}  # seed and batch_size: every component's, the run's
    out: dict[tuple[str, str], list[str]] = {}
    for (kind, name), cls in registry.components.items():
        params = declared(cls) or getattr(cls, "own_parameters", None) or ()
        out[(kind, name)] = [p.name for p in params if p.name not in implicit]
    return out


def _primary_keys(path: str) -> list[str]:
    """The keys beside ``path``'s last part in the primary config (top level: also its groups)."""
    from importlib import resources

    from omegaconf import DictConfig, OmegaConf

    text = resources.files("omnistory_core.conf").joinpath("config.yaml").read_text("utf-8")
    node: Any = OmegaConf.create(text)
    parts = path.split(".")[:-1]
    for part in parts:
        node = node.get(part) if isinstance(node, DictConfig) else None
    if not isinstance(node, DictConfig):
        return []
    keys = [str(k) for k in node if k not in ("defaults", "hydra")]
    if not parts:
        for entry in OmegaConf.to_container(node.get("defaults") or []) or []:
            if isinstance(entry, dict):
                keys += [str(k) for k in entry if not str(k).startswith("override")]
    return sorted(set(keys))


def suggestions(key: str, argv: Sequence[str], registry: Any) -> list[str]:
    """What ``key`` may have meant: component parameters (those of the components the command
    line names first) and settings of the primary config."""
    from omnistory_core.plugins import COMPONENT_HOOKS

    groups = tuple(COMPONENT_HOOKS.values())
    leaf = key.rsplit(".", 1)[-1]
    found: list[str] = []
    settings = _primary_keys(key)
    prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
    found += [prefix + k for k in difflib.get_close_matches(leaf, settings, n=2, cutoff=0.75)]
    if "." not in key:
        chosen = _chosen(argv, groups)
        params = _parameters(registry)
        for first in (True, False):
            for (kind, name), names in sorted(params.items()):
                if ((kind, name) in chosen) != first:
                    continue
                for match in difflib.get_close_matches(leaf, names, n=1, cutoff=0.75):
                    found.append(f"{kind}.{match}")
    return list(dict.fromkeys(found))[:MAX_SUGGESTIONS]


def unknown_setting_line(message: str, argv: Sequence[str], registry: Any) -> str | None:
    """One line for Hydra's refusal of an unknown key (None: another error)."""
    key = refused_key(message)
    if key is None:
        return None
    given = _given(key, argv)
    value = given.split("=", 1)[1] if "=" in given else "..."
    hints = suggestions(key, argv, registry)
    line = f"{given}: the run has no setting {key!r}"
    if hints:
        line += f"; did you mean {' or '.join(f'{h}={value}' for h in hints)}?"
    if "." not in key:
        line += " (a component's parameter is set under its group: image.NAME=..., tts.NAME=...)"
    return line


__all__ = ["refused_key", "suggestions", "unknown_setting_line"]
