"""Where a ViStoryBench run lies, so that runs add and never erase.

The official layout's levels mean what they say: ``<method>`` is the system, ``<mode>`` names the
output-changing settings, ``<lang>`` and ``<timestamp>`` the run::

    <job>/outputs/<method>/<mode>/<lang>/<timestamp>/<story>/shots/shot_<NN>.png

* **mode**: ``task.mode`` named on the command line is used as given (``named``); otherwise, when
  the command line changes output-changing settings of the system (a component parameter such as
  ``image.size=256``, or a component choice such as ``planner=gpt`` beside a preset), the mode is
  derived from them: ``<task.mode>-image.size=256`` (``derived``; a long list becomes
  ``<task.mode>-p<digest>``); else ``task.mode`` as the config has it (``base``, or the one a
  preset names: ``configured``).  Runtime parameters (devices, endpoints) change no output and
  no mode; nor does a weights path (``image.model=/models/FLUX.1-Kontext-dev``, a local copy of
  the checkpoint): the weights' content keys every call, and a job directory whose run used
  other weights refuses the new ones (:func:`check_same_run`).
* **job directory** (:func:`job_name`, the task's ``job_name``): the method, then each level that
  tells this run apart from the default run of the method: the mode when it is not ``base``, the
  language when not ``en``, the split when not ``full``, the story subset, the seed when not 0,
  ``task.run_timestamp`` when fixed, and a digest of the changed settings when a named mode
  hides them.  ``copy_paste`` (English, full, base), ``copy_paste-ch``, ``copy_paste-ch-lite``,
  ``copy_paste-base-image.size=256``: two runs that differ in anything that changes their
  outputs never share a directory, in single runs and in ``-m`` sweeps alike, and a re-run of
  the same settings lands in its own directory again (0 calls, its timestamp kept).
* **timestamp**: ``task.run_timestamp``, else the one the job directory's run already has, else
  the job's start time; it is *claimed* under ``<runs>/.vistory_runs/<method>/<mode>/<lang>/``
  (one empty-content file per timestamp, created exclusively), so two runs of one method, mode and
  language started in the same second (a lite and a full run of a sweep) get two timestamps and
  never merge when their trees are put together (:mod:`omnistory_vistorybench.export`).

A job directory already holding a run made with other settings (its preset edited since) is
refused in one line before anything is written (:func:`check_same_run`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from omnistory_core.api import ConfigError
from omnistory_vistorybench import layout

DEFAULT_MODE = "base"
DEFAULT_LANGUAGE = "en"
DEFAULT_SPLIT = "full"
#: the component groups whose settings make a ViStoryBench system
SYSTEM_GROUPS: tuple[str, ...] = ("planner", "image")
#: where sibling runs claim their timestamps (beside the job directories)
CLAIMS_DIR = ".vistory_runs"
#: a derived mode longer than this becomes ``<mode>-p<digest>``
MAX_MODE = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,@-]+")


@dataclass(frozen=True)
class RunIdentity:
    """Everything that places one run: the official levels, how the mode was chosen and the
    settings that changed (``group.key`` -> value, or ``group`` -> a component choice)."""

    method: str
    mode: str
    mode_source: str
    language: str
    split: str
    stories: tuple[str, ...] | None = None
    seed: int = 0
    run_timestamp: str | None = None
    changed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stories"] = list(self.stories) if self.stories is not None else None
        return out


def _select(config: Any, path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        getter = getattr(node, "get", None)
        if getter is None:
            return None
        node = getter(part)
    return node


def _plain(value: Any) -> str:
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - hydra always brings omegaconf
        pass
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "_"


def _not_settings(group: str, name: Any) -> set[str]:
    """The keys of a component that name no setting of its outputs: runtime parameters, and the
    weights it loads (a local copy of the same checkpoint is the same mode; the content
    fingerprint keys the calls and :func:`check_same_run` compares it)."""
    from omnistory_core.kit.jobs import load_plugins

    try:
        cls = load_plugins().component(group, str(name))
    except Exception:  # noqa: BLE001 - an unknown component fails the job in one line itself
        return set()
    weights = {p.name for p in getattr(cls, "parameters", None) or () if p.weights}
    return {*getattr(cls, "runtime_params", ()), *weights, "batch_size", "runner", "default_choice"}


def changed_settings(config: Any, overrides: Sequence[str]) -> dict[str, str]:
    """The output-changing settings the command line sets: component parameters of the system's
    groups (their composed values, so ``size=256`` and ``size=256.0`` agree) and component
    choices beside a preset (``planner=gpt``); runtime parameters are left out."""
    from omnistory_core.kit.jobs import parse_param_override

    texts = [str(o) for o in overrides]
    keys = {t.split("=", 1)[0].lstrip("+~") for t in texts}
    preset = "system" in keys and "system_id" not in keys
    method = str(_select(config, "system_id"))
    out: dict[str, str] = {}
    for text in texts:
        parsed = parse_param_override(text, SYSTEM_GROUPS)
        if parsed is not None:
            if not parsed.is_parameter:
                continue
            name = _select(config, f"{parsed.group}.name")
            skip = _not_settings(parsed.group, name)
            inner = _select(config, f"{parsed.group}.inner")
            if inner is not None:  # a wrapper (first_ref, sequential): its inner's keys too
                skip |= _not_settings(parsed.group, inner)
            if parsed.key in skip:
                continue
            path = f"{parsed.group}.{parsed.path}"
            out[path] = _plain(_select(config, path))
            continue
        key, sep, value = text.partition("=")
        key = key.lstrip("+~")
        if sep and key in SYSTEM_GROUPS and preset and value != method:
            out[key] = value
    return dict(sorted(out.items()))


def _named_mode(overrides: Sequence[str]) -> bool:
    return any(str(o).split("=", 1)[0].lstrip("+~") == "task.mode" for o in overrides)


def derive_mode(base: str, changed: Mapping[str, str]) -> str:
    """``<base>-<k>=<v>-...`` (folder-safe), or ``<base>-p<digest>`` when that is too long."""
    if not changed:
        return base
    parts = [_safe(f"{k}={v}") for k, v in changed.items()]
    mode = "-".join([base, *parts])
    if len(mode) <= MAX_MODE:
        return mode
    return f"{base}-p{settings_digest(changed)}"


def settings_digest(changed: Mapping[str, str]) -> str:
    text = json.dumps(dict(changed), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def run_timestamp_of(value: Any) -> str | None:
    """``task.run_timestamp`` as ``YYYYMMDD_HHMMSS`` (None when unset); YAML and Hydra read
    ``20250101_120000`` as the integer 20250101120000, which is put back."""
    if value in (None, ""):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(value)
        value = f"{digits[:8]}_{digits[8:]}" if len(digits) == 14 else digits
    text = str(value)
    if not layout.WRITTEN_TIMESTAMP.match(text):
        raise ConfigError(f"task.run_timestamp={text!r} is not YYYYMMDD_HHMMSS")
    return text


def identity(config: Any, overrides: Sequence[str]) -> RunIdentity:
    """The run a job config places (``config``: the composed config, a DictConfig or plain
    mapping; ``overrides``: its command line, as ``hydra.overrides.task``)."""
    base = str(_select(config, "task.mode") or DEFAULT_MODE)
    changed = changed_settings(config, overrides)
    if _named_mode(overrides):
        mode, source = base, "named"
    elif changed:
        mode, source = derive_mode(base, changed), "derived"
    else:
        mode, source = base, "configured"
    stories = _select(config, "dataset.stories")
    seed = _select(config, "seed")
    return RunIdentity(
        method=str(_select(config, "system_id")),
        mode=mode,
        mode_source=source,
        language=str(_select(config, "dataset.language") or DEFAULT_LANGUAGE),
        split=str(_select(config, "dataset.split") or DEFAULT_SPLIT),
        stories=tuple(_story_id(s) for s in _plain_list(stories)) if stories else None,
        seed=int(seed or 0),
        run_timestamp=run_timestamp_of(_select(config, "task.run_timestamp")),
        changed=changed,
    )


def _plain_list(value: Any) -> list[Any]:
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return list(value) if isinstance(value, list | tuple) else [value]


def _story_id(value: Any) -> str:
    text = str(value).strip()
    return f"{int(text):02d}" if text.isdigit() else text


def job_name_of(run: RunIdentity) -> str:
    """The job directory's name (see the module docstring)."""
    parts = [run.method]
    if run.mode != DEFAULT_MODE:
        parts.append(run.mode)
    if run.language != DEFAULT_LANGUAGE:
        parts.append(run.language)
    if run.split != DEFAULT_SPLIT:
        parts.append(run.split)
    if run.stories is not None:
        listed = "_".join(run.stories)
        digest = hashlib.sha256(listed.encode()).hexdigest()[:8]
        parts.append(f"stories{listed}" if len(listed) <= 24 else f"stories-{digest}")
    if run.seed != 0:
        parts.append(f"seed{run.seed}")
    if run.run_timestamp is not None:
        parts.append(run.run_timestamp)
    if run.mode_source == "named" and run.changed:
        parts.append(f"p{settings_digest(run.changed)}")
    return "-".join(_safe(p) for p in parts)


def job_name(cfg: Any) -> str:
    """The task's ``job_name``: :func:`job_name_of` the run ``cfg`` places, its overrides read
    from ``cfg.hydra.overrides.task`` (the composed config Hydra resolves the directory in)."""
    overrides = _select(cfg, "hydra.overrides.task") or []
    return job_name_of(identity(cfg, list(overrides)))


def job_overrides() -> list[str]:
    """The running Hydra job's command line (empty outside a Hydra app)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return [str(o) for o in HydraConfig.get().overrides.task]
    except Exception:  # noqa: BLE001 - not inside a Hydra app (tests calling generate directly)
        return []


# -- the timestamp ----------------------------------------------------------------------------


def claims_root(job_dir: Path) -> Path:
    return job_dir.parent / CLAIMS_DIR


def claim_timestamp(job_dir: Path, run: RunIdentity, wanted: str, *, fixed: bool) -> str:
    """Claim ``wanted`` (or, when a sibling job has it and it is not ``fixed``, the next free
    second) for this job's run of (method, mode, language); returns the claimed timestamp.  A
    ``fixed`` timestamp another job holds is a :class:`ConfigError`."""
    folder = claims_root(job_dir) / run.method / run.mode / run.language
    folder.mkdir(parents=True, exist_ok=True)
    moment = datetime.strptime(wanted, layout.TIMESTAMP_FORMAT)
    owner = job_dir.name
    for _ in range(3600):
        stamp = layout.format_timestamp(moment)
        claim = folder / stamp
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = claim.read_text(encoding="utf-8").strip() if claim.is_file() else ""
            if holder == owner:
                return stamp
            if fixed:
                raise ConfigError(
                    f"task.run_timestamp={stamp}: run {run.method}/{run.mode}/{run.language}/"
                    f"{stamp} is already the run of job directory {job_dir.parent / holder};"
                    " choose another timestamp"
                ) from None
            moment += timedelta(seconds=1)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(owner)
        return stamp
    raise ConfigError(f"no free timestamp for {run.method}/{run.mode}/{run.language} near {wanted}")


# -- the job directory's earlier run -----------------------------------------------------------


def recorded_run(job_dir: Path) -> dict[str, Any] | None:
    """The ``run`` block of the job directory's manifest (None when there is none)."""
    try:
        manifest = json.loads((job_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run = manifest.get("run") if isinstance(manifest, dict) else None
    return run if isinstance(run, dict) else None


def check_same_run(job_dir: Path, run: RunIdentity, settings: Mapping[str, Any]) -> None:
    """Refuse to run into a job directory whose run was made with other settings (a preset
    edited, a component upgraded to other output parameters): its outputs would be replaced.
    ``settings``: this run's components and output parameters (:func:`system_settings`)."""
    earlier = recorded_run(job_dir)
    if earlier is None:
        return
    before = earlier.get("settings") or {}
    differences = setting_differences(before, settings)
    levels = [
        f"{name} {earlier.get(name)!r} -> {value!r}"
        for name, value in (("mode", run.mode), ("language", run.language), ("split", run.split))
        if earlier.get(name) not in (None, value)
    ]
    found = levels + differences
    if found:
        raise ConfigError(
            f"{job_dir} holds the run {earlier.get('method')}/{earlier.get('mode')}/"
            f"{earlier.get('language')}/{earlier.get('timestamp')} made with other settings"
            f" ({'; '.join(found[:4])}); name this one with task.mode=NAME or system_id=NAME"
            " (or move that directory away)"
        )


def system_settings(components: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """What a run's outputs depend on besides its inputs: each stage component's key and output
    parameters (the weights it loads by content, ``__weights__``, not by path), and the seed."""
    out: dict[str, Any] = {"seed": seed}
    for group, component in components.items():
        if component is None:
            continue
        weights = _weights_params(component)
        inner = getattr(component, "inner", None)  # a wrapper: the inner's parameters are its
        if inner is not None:
            weights |= _weights_params(inner)
        params = {k: v for k, v in component.output_params().items() if k not in weights}
        out[group] = {"component": component.key(), "params": json.loads(_plain(params))}
    return out


def _weights_params(component: Any) -> set[str]:
    return {p.name for p in type(component).parameters or () if p.weights}


def setting_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The settings that differ between two :func:`system_settings` (a parameter only one side
    has, such as one a component added later at its default, is not a difference)."""
    found = []
    for group in sorted(set(before) | set(after)):
        old, new = before.get(group), after.get(group)
        if not isinstance(old, Mapping) or not isinstance(new, Mapping):
            if old != new:
                found.append(f"{group} {old!r} -> {new!r}")
            continue
        if old.get("component") != new.get("component"):
            found.append(f"{group} {old.get('component')} -> {new.get('component')}")
            continue
        p_old, p_new = old.get("params") or {}, new.get("params") or {}
        for key in sorted(set(p_old) & set(p_new)):
            if p_old[key] != p_new[key]:
                found.append(f"{group}.{key} {p_old[key]!r} -> {p_new[key]!r}")
    return found


__all__ = [
    "CLAIMS_DIR",
    "DEFAULT_MODE",
    "RunIdentity",
    "changed_settings",
    "check_same_run",
    "claim_timestamp",
    "derive_mode",
    "identity",
    "job_name",
    "job_name_of",
    "job_overrides",
    "recorded_run",
    "run_timestamp_of",
    "setting_differences",
    "system_settings",
]
