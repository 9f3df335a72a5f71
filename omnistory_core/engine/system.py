"""A system is the stages its components imply.

    orchestration                planner ──plan──> image expert, TTS expert
    semi-orchestration (T+I)     backbone{text,image} ──plan.speech──> TTS expert
    semi-orchestration (T+S)     backbone{text,speech} ──plan.image_prompt──> image expert
    any-to-any                   backbone{text,image,speech}

:func:`resolve_system` turns a composed configuration into the groups that run, its paradigm and
its derived system id, or refuses it with a :class:`ConfigError` before any model is loaded: a
planner and a backbone together, an expert for a modality the backbone makes natively, a modality
nothing makes, a group the engine would not use.  The primary config selects ``planner``, ``image``
and ``tts`` through ``<group>/default.yaml`` files that carry ``default_choice: true``: those
defaults fill an orchestration system and step aside for a backbone, while a choice the user (or a
preset) made explicitly is never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from omnistory_core.components import BACKBONE_MODALITIES
from omnistory_core.errors import ConfigError  # defined in a leaf; importable from here too

#: group -> the output modality it makes
EXPERT_MODALITY: dict[str, str] = {"image": "image", "tts": "speech"}
MODALITY_GROUP: dict[str, str] = {m: g for g, m in EXPERT_MODALITY.items()}
#: every paradigm the engine derives
PARADIGMS: tuple[str, ...] = (
    "orchestration",
    "semi-orchestration (T+I)",
    "semi-orchestration (T+S)",
    "any-to-any",
    "baseline",
)
#: top-level keys of the primary config a generation run reads
RUN_KEYS = frozenset(
    {
        "task",
        "output_root",
        "sweep_name",
        "system_id",
        "paradigm",
        "seed",
        "allow_oracle",
        "dataset",
        "planner",
        "backbone",
        "image",
        "tts",
        "evaluation",
        "engine",
    }
)


@dataclass(frozen=True)
class SystemPlan:
    """What will run: the groups in stage order with their config nodes, and what they are."""

    specs: dict[str, dict[str, Any]]
    paradigm: str
    system_id: str

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(self.specs)


def chosen(node: Any) -> TypeGuard[Mapping[str, Any]]:
    """A group node that names a component (``backbone: null`` leaves only its runner)."""
    return isinstance(node, Mapping) and bool(node.get("name"))


def explicit(node: Any) -> TypeGuard[Mapping[str, Any]]:
    """Chosen by the user or a preset, not filled in by ``<group>/default.yaml``."""
    return chosen(node) and not bool(node.get("default_choice", False))


def paradigm_of(produces: frozenset[str] | None, baseline: bool = False) -> str:
    """The paper's paradigm for a planner (``produces=None``) or a backbone's ``produces``."""
    if baseline:
        return "baseline"
    if produces is None:
        return "orchestration"
    if produces >= BACKBONE_MODALITIES:
        return "any-to-any"
    if produces == frozenset({"text", "image"}):
        return "semi-orchestration (T+I)"
    if produces == frozenset({"text", "speech"}):
        return "semi-orchestration (T+S)"
    raise ConfigError(f"no paradigm for a backbone that produces {sorted(produces)}")


def paradigm_family(paradigm: str) -> str:
    """``semi-orchestration (T+I)`` -> ``semi-orchestration`` (the paper's tables group them)."""
    return paradigm.split(" (", 1)[0]


def derived_system_id(cfg: Mapping[str, Any]) -> str:
    """The id of a composed system from the components that run, e.g. ``gpt-dev-parler`` or
    ``mmada-parler``; presets name themselves instead (``mmada_parler``)."""
    if chosen(cfg.get("backbone")):
        names = [str(cfg["backbone"]["name"])]
        names += [str(cfg[g]["name"]) for g in ("image", "tts") if explicit(cfg.get(g))]
    else:
        names = [str(cfg[g]["name"]) for g in ("planner", "image", "tts") if chosen(cfg.get(g))]
    return "-".join(names) or "empty"


def _names(registry: Any, kind: str) -> str:
    return ", ".join(registry.names(kind)) or "none installed"


def resolve_system(cfg: Mapping[str, Any], registry: Any) -> SystemPlan:
    """The groups that run for this configuration, or a :class:`ConfigError` saying why none can.

    ``cfg`` is the resolved job config as plain containers; ``registry`` the plugin registry.
    """
    unused = sorted(k for k in cfg if k not in RUN_KEYS)
    if unused:
        raise ConfigError(
            f"config key(s) {', '.join(unused)} are not used by a generation run (it reads"
            " task, planner, backbone, image, tts, dataset, engine, evaluation); metrics and"
            " judges are chosen with evaluation.metrics / evaluation.judges or `omnistory evaluate`"
        )
    specs: dict[str, dict[str, Any]] = {}
    if chosen(cfg.get("backbone")):
        backbone = cfg["backbone"]
        cls = registry.component("backbone", str(backbone["name"]))
        produces = frozenset(cls.produces)  # checked when the backbone registered
        name = cls.name
        if explicit(cfg.get("planner")):
            raise ConfigError(
                f"planner={cfg['planner']['name']} and backbone={name} together: a backbone writes"
                " its own narration and plan; choose one of them"
            )
        specs["backbone"] = dict(backbone)
        for group, modality in EXPERT_MODALITY.items():
            node = cfg.get(group)
            if modality in produces:
                if explicit(node):
                    raise ConfigError(
                        f"{group}={node['name']} with backbone={name}, which makes {modality}"
                        f" natively ({'+'.join(sorted(produces))}): drop {group}=..."
                    )
            elif explicit(node):
                specs[group] = dict(node)
            else:
                raise ConfigError(
                    f"backbone={name} does not make {modality} and no {group} expert was chosen:"
                    f" add {group}=NAME (installed: {_names(registry, group)})"
                )
        paradigm = paradigm_of(produces, bool(getattr(cls, "baseline", False)))
    else:
        for group, what in (("planner", "the plan"), ("image", "images"), ("tts", "speech")):
            node = cfg.get(group)
            if not chosen(node):
                raise ConfigError(
                    f"nothing makes {what}: choose {group}=NAME (installed:"
                    f" {_names(registry, group)}) or a backbone=NAME"
                )
            specs[group] = dict(node)
        planner = registry.component("planner", str(cfg["planner"]["name"]))
        paradigm = paradigm_of(None, bool(getattr(planner, "baseline", False)))
    declared = cfg.get("paradigm")
    if declared not in (None, "", paradigm):
        raise ConfigError(
            f"paradigm={declared!r} does not match the stages that run ({' -> '.join(specs)}:"
            f" {paradigm}); the paradigm is derived, remove it from the config"
        )
    system_id = str(cfg.get("system_id") or derived_system_id(cfg))
    return SystemPlan(specs=specs, paradigm=paradigm, system_id=system_id)


def job_config(cfg: Any) -> dict[str, Any]:
    """A composed config (``DictConfig``, with or without the ``hydra`` node) as the resolved plain
    mapping :func:`resolve_system` takes."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(cfg, DictConfig):
        return dict(cfg)
    keys = [k for k in cfg if k != "hydra"]
    return OmegaConf.to_container(OmegaConf.masked_copy(cfg, keys), resolve=True)  # type: ignore[return-value]
