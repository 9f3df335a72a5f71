"""Which evaluators a command asks for: their configs (core or plugin yaml plus ``--set``
overrides), panels expanded to their judges, and the evaluator components built from them.

Used by ``evaluate`` (:mod:`omnistory_eval.command`), the end-of-sweep evaluation and
``prefetch``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def evaluator_config(kind: str, name: str, overrides: list[str]) -> dict[str, Any]:
    """The evaluator's yaml (core or plugin, on Hydra's search path) plus ``--set`` overrides."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException
    from omegaconf import OmegaConf

    prefix = f"{kind}."
    own = [o[len(prefix) + len(name) + 1 :] for o in overrides if o.startswith(f"{prefix}{name}.")]
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="omnistory_core.conf", version_base="1.3"):
        try:
            cfg = compose(config_name=f"{kind}/{name}")
        except MissingConfigException:
            cfg = OmegaConf.create({"name": name})
    data = _unwrap(OmegaConf.to_container(cfg, resolve=True), kind, name)
    if own:
        # merged after unwrapping, so `--set metric.clip.model=...` works whether or not the
        # yaml is a _global_ package; a leading + (Hydra's "add a key") is accepted too
        merged = OmegaConf.merge(
            OmegaConf.create(data), OmegaConf.from_dotlist([o.lstrip("+") for o in own])
        )
        data = OmegaConf.to_container(merged, resolve=True)
    return data  # type: ignore[return-value]


def expand_panels(kind: str, names: list[str]) -> list[str]:
    """Replace panel configs (a yaml holding ``judges: [ids]``, e.g. ``panel_a`` or ``all``) by
    their members, keeping order and dropping repeats."""
    out: list[str] = []
    for name in names:
        members = evaluator_config(kind, name, []).get("judges")
        for member in members if isinstance(members, list) else [name]:
            if member not in out:
                out.append(str(member))
    return out


def _unwrap(data: Any, kind: str, name: str) -> Any:
    """Configs stored in a group may come back nested under the group name (and their own)."""
    while isinstance(data, dict) and set(data) == {kind}:
        data = data[kind]
    if isinstance(data, dict) and name in data and "name" not in data:
        data = data[name]
    return data


def check_evaluator_names(metrics: list[str], judges: list[str]) -> None:
    """Raise :class:`~omnistory_core.plugins.PluginError` for a metric, judge or panel that does
    not exist, without building anything; usable inside a running Hydra app (a sweep checks its
    ``evaluation.*`` before generating anything, not after)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException
    from omegaconf import OmegaConf

    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    for name in metrics:
        registry.component("metric", str(name))
    inside_app = GlobalHydra.instance().is_initialized()
    for name in judges:
        members: Any = None
        if inside_app:  # the app's own search path (plugins' yaml included), left as it is
            try:
                data = OmegaConf.to_container(compose(config_name=f"judge/{name}"), resolve=True)
                members = (_unwrap(data, "judge", str(name)) or {}).get("judges")
            except MissingConfigException:
                members = None
        else:
            members = evaluator_config("judge", str(name), []).get("judges")
        for member in members if isinstance(members, list) else [name]:
            registry.component("judge", str(member))


def build_evaluators(
    metrics: list[str], judges: list[str], overrides: list[str], store_root: Path | None = None
):
    """Evaluator components from their configs; ``runner.python`` (or the environment variable
    OMNISTORY_RUNNER_<KIND>_<NAME>) runs one in its own environment through the isolation worker."""
    from omnistory_core.engine.isolation import maybe_isolate
    from omnistory_core.engine.job import build_component
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    out = []
    for kind, names in (("metric", metrics), ("judge", expand_panels("judge", judges))):
        for name in names:
            spec = evaluator_config(kind, name, overrides)
            spec.setdefault("name", name)
            component = build_component(registry, kind, spec, seed=0, allow_oracle=False)
            if store_root is not None:
                component = maybe_isolate(component, spec.get("runner"), store_root)
            out.append(component)
    return out
