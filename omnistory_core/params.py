"""Declared component parameters: one place for a parameter's name, type, default and doc.

A component lists its parameters in a ``parameters`` class attribute::

    from omnistory_core.params import Param

    class MyTTS(TTSExpert):
        name = "mytts"
        parameters = (
            Param("model", str, "org/mytts-large", "hub id or local directory"),
            Param("temperature", float, 1.0, "sampling temperature", gt=0),
            Param("dtype", str, "float32", "weights dtype", choices=("float32", "bfloat16")),
            Param("device", str, "auto", "auto | cpu | cuda[:N]", runtime=True),
        )

From that declaration:

* the component is built with the defaults filled in (``self.params["temperature"]``), and an
  unknown key, a wrong type, a value outside ``choices`` or the bounds is refused when it is built:
  one line naming the component, the key and the valid keys (a :class:`ParamError`, which is a
  ``ConfigError``: exit 2 on the command line);
* ``runtime=True`` parameters (endpoints, devices, concurrency) stay out of the cache key, every
  other parameter goes into it; ``key_at_default=False`` keeps a parameter added after stores were
  written out of the key while it has its default, so those stores stay valid; ``weights=True``
  marks a checkpoint file or model directory: when it names a local path, the content
  fingerprint of that path joins the key too;
* the component's Hydra config node (``tts=mytts``) is generated: a yaml file is needed only for
  values that differ from the declaration (an environment-variable default) or for presets;
* ``python -m omnistory_core plugins --params`` lists them.

Every declared component also accepts ``seed`` (set from the run's ``seed``; part of the key) and
``batch_size`` (items per call; runtime).  A component that declares nothing (``parameters =
None``) takes any keys unchecked, as before.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omnistory_core.errors import ConfigError

#: the Python types a parameter may have (what a yaml / command-line value can be)
TYPES: dict[type, str] = {t: t.__name__ for t in (str, int, float, bool, list, dict)}
#: how an error message names what a type accepts
WORDS: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a mapping",
}


class ParamError(ConfigError, ValueError):
    """A parameter the component does not declare, or a value its declaration refuses."""


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    ``type`` is one of ``str int float bool list dict`` or a tuple of them; ``None`` is allowed when
    the default is ``None`` or ``None`` is in the tuple.  An ``int`` is accepted for a ``float``
    (kept as given, so cache keys written before stay valid).  ``choices`` restricts the value to a
    set; ``ge``/``gt``/``le`` bound a number.
    """

    name: str
    type: type | tuple[type | None, ...]
    default: Any = None
    doc: str = ""
    runtime: bool = False
    choices: tuple[Any, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    key_at_default: bool = True
    #: the value names weights the component loads (a checkpoint file, a local model
    #: directory): when it is a local path, its content fingerprint joins the call key
    #: (:mod:`omnistory_core.kit.fingerprints`), so a file replaced at the same path recomputes
    weights: bool = False

    @property
    def types(self) -> tuple[type, ...]:
        kinds = self.type if isinstance(self.type, tuple) else (self.type,)
        return tuple(t for t in kinds if t is not None)

    @property
    def nullable(self) -> bool:
        return self.default is None or (isinstance(self.type, tuple) and None in self.type)

    @property
    def type_name(self) -> str:
        names = [TYPES.get(t, getattr(t, "__name__", str(t))) for t in self.types]
        return " | ".join(names + (["None"] if self.nullable else []))

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable (``"<name> must be ..."``), or None."""
        expected = " or ".join(WORDS[t] for t in self.types) + (" or null" if self.nullable else "")
        if value is None:
            return None if self.nullable else f"{self.name} must be {expected}, got null"
        if not any(_is_instance(value, t) for t in self.types):
            return f"{self.name} must be {expected}, got {value!r}"
        if self.choices is not None and value not in self.choices:
            return f"{self.name} must be one of {list(self.choices)}, got {value!r}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            for op, bound, ok in (
                (">=", self.ge, lambda v, b: v >= b),
                (">", self.gt, lambda v, b: v > b),
                ("<=", self.le, lambda v, b: v <= b),
            ):
                if bound is not None and not ok(value, bound):
                    return f"{self.name} must be {op} {bound:g}, got {value!r}"
        return None

    def row(self) -> dict[str, Any]:
        """What ``plugins --params`` shows."""
        constraint = []
        if self.choices is not None:
            constraint.append("one of " + ", ".join(map(str, self.choices)))
        for op, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le)):
            if bound is not None:
                constraint.append(f"{op} {bound:g}")
        return {
            "name": self.name,
            "type": self.type_name,
            "default": self.default,
            "doc": self.doc,
            "runtime": self.runtime,
            **({"weights": True} if self.weights else {}),
            "constraint": "; ".join(constraint),
        }


def _is_instance(value: Any, kind: type) -> bool:
    if isinstance(value, bool):  # bool is an int subclass; never accept it for a number
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    if kind is list:
        return isinstance(value, list | tuple)
    if kind is dict:
        return isinstance(value, Mapping)
    return isinstance(value, kind)


#: accepted by every declared component: the engine sets ``seed`` from the run's seed
IMPLICIT: tuple[Param, ...] = (
    Param("seed", int, 0, "random seed (set from the run's top-level seed)"),
    Param(
        "batch_size",
        int,
        None,
        "items per call (null: the component's default_batch_size)",
        runtime=True,
        ge=1,
    ),
)


def check_declaration(owner: str, params: Sequence[Param]) -> None:
    """A declaration's own mistakes (found when the plugin is imported, not when a user runs it)."""
    seen: set[str] = set()
    for param in params:
        if not isinstance(param, Param):
            raise TypeError(f"{owner}.parameters: {param!r} is not a Param")
        if param.name in seen:
            raise TypeError(f"{owner}.parameters: {param.name!r} is declared twice")
        seen.add(param.name)
        unknown = [t for t in param.types if t not in TYPES]
        if unknown or not param.types:
            raise TypeError(
                f"{owner}.parameters: {param.name} has type {param.type!r}; use"
                f" {', '.join(TYPES.values())} (or a tuple of them, with None)"
            )
        problem = param.problem(param.default)
        if problem:
            raise TypeError(f"{owner}.parameters: bad default: {problem}")


def declared(cls: type) -> tuple[Param, ...] | None:
    """The class's parameters plus the implicit ones, or None if it declares none."""
    own = getattr(cls, "parameters", None)
    if own is None:
        return None
    names = {p.name for p in own}
    return (*own, *(p for p in IMPLICIT if p.name not in names))


def label(cls: type) -> str:
    return f"{getattr(cls, 'kind', '?')}={getattr(cls, 'name', cls.__name__)}"


def _plain(value: Any) -> Any:
    """OmegaConf containers as plain lists and dicts (the engine usually resolves them already)."""
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    return value


def with_defaults(params: Sequence[Param], *added: Param, **defaults: Any) -> tuple[Param, ...]:
    """A subclass's declaration from its base's: ``params`` with some defaults changed
    (``defaults``) and ``added`` declared after them (an added one replaces a same-named one)::

        parameters = with_defaults(Base.parameters, Param("effort", str, None, "..."), model="x")

    Raises ``TypeError`` for a default of a parameter ``params`` does not declare."""
    unknown = sorted(set(defaults) - {p.name for p in params})
    if unknown:
        raise TypeError(f"with_defaults: {', '.join(unknown)} not declared in the base parameters")
    new_names = {p.name for p in added}
    out = [
        dataclasses.replace(p, default=defaults[p.name]) if p.name in defaults else p
        for p in params
        if p.name not in new_names
    ]
    return (*out, *added)


def resolve_params(
    cls: type,
    given: Mapping[str, Any],
    *,
    error: type[ParamError] = ParamError,
    prefix: str = "",
) -> dict[str, Any]:
    """The parameters a component is built with: declared defaults, then ``given``, validated.

    Raises :class:`ParamError` (one line: component, key, valid keys) for an unknown key or a
    refused value; ``error`` (a subclass) is raised instead when given, and ``prefix`` goes
    before the key in a refused value's message (``planner.`` gives ``planner.max_tokens must
    be ...``).  A class without a declaration gets ``given`` unchanged.
    """
    params = declared(cls)
    if params is None:
        return dict(given)
    by_name = {p.name: p for p in params}
    unknown = sorted(str(k) for k in given if k not in by_name)
    if unknown:
        hints = [
            f"{key} -> {close[0]}"
            for key in unknown
            if (close := difflib.get_close_matches(key, list(by_name), n=1, cutoff=0.6))
        ]
        raise error(
            f"{label(cls)}: unknown parameter(s) {', '.join(unknown)}; known:"
            f" {', '.join(sorted(by_name))}"
            + (f" (did you mean {', '.join(hints)}?)" if hints else "")
        )
    out: dict[str, Any] = {}
    for param in params:
        if param.name in given:
            value = _plain(given[param.name])
            problem = param.problem(value)
            if problem:
                raise error(f"{label(cls)}: {prefix}{problem}")
            out[param.name] = value
        else:
            out[param.name] = _yaml_value(copy.deepcopy(param.default))
    return out


def key_params(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that change outputs: not runtime, not batch_size, and a
    ``key_at_default=False`` parameter only when it differs from its default."""
    declaration = {p.name: p for p in declared(cls) or ()}
    skip = set(getattr(cls, "runtime_params", ())) | {"batch_size"}
    out = {}
    for key, value in sorted(params.items()):
        if key in skip:
            continue
        param = declaration.get(key)
        if param is not None and not param.key_at_default and value == param.default:
            continue
        out[key] = value
    return out


def config_node(cls: type) -> dict[str, Any] | None:
    """The Hydra config node of a declared component (``tts=mytts`` without a yaml file): its name
    and every default it declares.  The implicit ``seed`` is not among them (the run's top-level
    ``seed`` fills it); a component that declares ``seed`` itself keeps its own."""
    params = getattr(cls, "parameters", None)
    if params is None:
        return None
    node: dict[str, Any] = {"name": cls.name}
    for param in params:
        node[param.name] = _yaml_value(param.default)
    return node


def _yaml_value(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_yaml_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _yaml_value(v) for k, v in value.items()}
    return value


# -- parameters on the command line -------------------------------------------------------------

#: keys of a component group's node that are not parameters of the component: how it runs and
#: whether ``<group>/default.yaml`` chose it.  Hydra checks them itself (they are in every node).
NOT_PARAMETERS = frozenset({"runner", "default_choice"})

_OVERRIDE = re.compile(
    r"(?P<prefix>\+\+|\+|~)?(?P<group>[A-Za-z_]\w*)\.(?P<key>[A-Za-z_][\w-]*)"
    r"(?P<rest>\.[^=@]*)?=(?P<value>.*)",
    re.DOTALL,
)


@dataclass(frozen=True)
class ParamOverride:
    """A command-line override of a component group's key: ``tts.temperature=0.5``,
    ``++backbone.extra.top_k=4``.  ``key`` is the parameter (the first key under the group)."""

    prefix: str
    group: str
    key: str
    path: str
    value: str

    @property
    def text(self) -> str:
        """The override as the user wrote it, without Hydra's prefix."""
        return f"{self.group}.{self.path}={self.value}"

    @property
    def is_parameter(self) -> bool:
        """A parameter of the component (not its runner, not its ``name``)."""
        return self.key not in NOT_PARAMETERS and self.key != "name"


def parse_param_override(text: str, groups: Sequence[str]) -> ParamOverride | None:
    """``text`` as an override of a key of one of the component ``groups``, or None (another
    override, a flag, a deletion ``~tts.x``, a package override ``tts@x=...``)."""
    match = _OVERRIDE.fullmatch(text)
    if match is None or match["prefix"] == "~" or match["group"] not in groups:
        return None
    rest = match["rest"] or ""
    return ParamOverride(
        prefix=match["prefix"] or "",
        group=match["group"],
        key=match["key"],
        path=match["key"] + rest,
        value=match["value"],
    )


def force_param_overrides(args: Sequence[str], groups: Sequence[str]) -> list[str]:
    """``args`` with every plain ``<group>.<key>=value`` of a component group written
    ``++<group>.<key>=value``.

    Why: a component's config node holds only the keys its yaml or declaration lists, and Hydra
    refuses any other key of a plain override while it composes ("Key 'temprature' is not in
    struct", exit 1, and in a sweep before any job runs).  Forced, the key reaches the job's
    config and the component checks it when the job builds it (:func:`resolve_params`: one line
    naming the component, the key, the known keys and a did-you-mean; in a sweep only the jobs
    whose component refuses it fail).  ``runner`` and ``default_choice`` stay as written: they are
    in every node, and Hydra's own check of them is right.  Sweep values (``=0.5,0.7``) are kept.
    """
    out = []
    for arg in args:
        parsed = parse_param_override(arg, groups)
        if parsed is not None and not parsed.prefix and parsed.key not in NOT_PARAMETERS:
            arg = "++" + arg
        out.append(arg)
    return out


#: the keys of a component group's ``runner`` node (how it runs: ``conf/config.yaml``)
RUNNER_KEYS = ("python", "env", "timeout_s")


def check_runner_overrides(args: Sequence[str], groups: Sequence[str]) -> str | None:
    """One line for an override of a runner key that does not exist (``tts.runner.pyhton=...``),
    with the known keys and a did-you-mean, or None.  Checked before Hydra composes, whose own
    refusal is a multi-line "not in struct" error with exit 1."""
    import difflib

    for arg in args:
        parsed = parse_param_override(arg, groups)
        if parsed is None or parsed.key != "runner" or "." not in parsed.path:
            continue
        sub = parsed.path.split(".")[1]
        if sub not in RUNNER_KEYS:
            close = difflib.get_close_matches(sub, RUNNER_KEYS, n=1)
            hint = f" (did you mean {parsed.group}.runner.{close[0]}?)" if close else ""
            return (
                f"{parsed.group}.runner.{sub}: not a runner setting; known:"
                f" {', '.join(RUNNER_KEYS)}{hint}"
            )
    return None


def describe(cls: type) -> list[dict[str, Any]] | None:
    """One row per parameter (name, type, default, doc, runtime, constraint), or None."""
    params = declared(cls)
    return None if params is None else [p.row() for p in params]


__all__ = [
    "IMPLICIT",
    "NOT_PARAMETERS",
    "Param",
    "ParamError",
    "ParamOverride",
    "RUNNER_KEYS",
    "check_declaration",
    "check_runner_overrides",
    "config_node",
    "declared",
    "describe",
    "force_param_overrides",
    "key_params",
    "parse_param_override",
    "resolve_params",
    "with_defaults",
]
