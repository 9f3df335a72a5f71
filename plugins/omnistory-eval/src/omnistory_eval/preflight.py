"""Before scoring anything: can every requested evaluator run here?

Each metric or judge declares what it needs (:class:`Need`, from its ``preflight_needs()``; a
plugin's evaluator, which cannot import this distribution, returns mappings with the same fields):
a package, a checkpoint, a server, an API key, or a parameter that is not set.  :func:`preflight`
checks all of them — a package by looking it up (nothing is imported), a checkpoint in the local
Hugging Face cache and then with one short request to the hub, a server with one short request —
and returns every problem at once, each with its remedy.  An evaluator run in another environment
(``runner.python``) has its packages looked up by that interpreter.  ``network=False`` (the dry
run's check, :mod:`omnistory_eval.plan`) makes no request: servers are not probed and
checkpoints are looked for in the local cache only.

A need may be non-blocking (``Need.warning`` says what running without it means: a judge's
JSON-repair model, without which the judge still answers): its problem is one warning line per
evaluator, not a reason to stop, and the evaluator hears of it (``Need.on_problem``) so that it
does not try what cannot work.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SERVER_TIMEOUT_S = 3.0
METRICS_EXTRA = "pip install 'omnistory-core[metrics]' (and torch)"


@dataclass(frozen=True)
class Need:
    """One thing an evaluator needs.  ``check``: ``package`` (``target`` a module name),
    ``weights`` (a hub id or local path), ``server`` (a base URL), ``key`` (an environment
    variable), ``interpreter`` (a Python executable), or ``config`` (a problem in the parameters
    themselves, described by ``detail``: always reported).  With a ``warning`` (what running
    without it means) the evaluator runs anyway: its problem is a warning, and ``on_problem``
    receives the problem's line."""

    check: str
    target: str
    remedy: str
    detail: str = ""
    warning: str = ""
    on_problem: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Problem:
    evaluator: str  # "judge/text-qwen3-30b-a3b"
    check: str
    target: str
    detail: str
    remedy: str
    warning: str = ""  # non-blocking: what running without it means (Need.warning)

    @property
    def blocking(self) -> bool:
        return not self.warning

    def line(self) -> str:
        return f"{self.evaluator}: {self.check} {self.target}: {self.detail}"


class PreflightFailed(Exception):
    """Some requested evaluator cannot run; ``problems`` lists all of them."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        names = sorted({p.evaluator for p in problems})
        super().__init__(
            f"{len(problems)} problem(s) keep {len(names)} evaluator(s) from running: "
            + ", ".join(names)
        )


# -- declarations -------------------------------------------------------------------------------


def weights_need(checkpoint: str, selection: str) -> Need:
    return Need(
        "weights",
        checkpoint,
        f"run `python -m omnistory_core prefetch {selection}` where the hub is reachable (same "
        "HF_HOME), then rerun",
    )


def package_need(module: str, remedy: str) -> Need:
    return Need("package", module, remedy)


def backend_needs(
    backend: str,
    spec: Any,
    params: dict[str, Any],
    prefix: str,
    role: str,
    opt_out: str | None = None,
    *,
    warning: str = "",
    on_problem: Callable[[str], None] | None = None,
) -> list[Need]:
    """What a judge backend (or the JSON-repair model behind one) needs.  ``prefix`` is the
    parameter path (``judge.<id>`` or ``judge.<id>.repair``) the remedies name.  ``warning`` and
    ``on_problem`` (a need to run without, see :class:`Need`) go to every need but a ``config``
    one: a setting that cannot work is a mistake to fix, whatever it sets."""
    needs = _backend_needs(backend, spec, params, prefix, role, opt_out)
    return [
        n if n.check == "config" else replace(n, warning=warning, on_problem=on_problem)
        for n in needs
    ]


def _backend_needs(
    backend: str,
    spec: Any,
    params: dict[str, Any],
    prefix: str,
    role: str,
    opt_out: str | None,
) -> list[Need]:
    judge_id = prefix.split(".")[1] if prefix.count(".") else prefix
    selection = f"judge={judge_id}"
    alternative = f"; or {opt_out} (answers needing repair then stay invalid)" if opt_out else ""
    checkpoint = str(params.get("checkpoint") or spec.checkpoint or "")
    if backend == "vllm":
        needs = [
            package_need(
                "vllm",
                f"pip install vllm (needs a GPU), or serve the model (`vllm serve {checkpoint}`) "
                f"and set {prefix}.backend=openai {prefix}.base_url=http://HOST:PORT/v1{alternative}",
            )
        ]
        if checkpoint:
            needs.append(weights_need(checkpoint, selection))
        return needs
    if backend == "transformers":
        remedy = f"pip install transformers torch, or set {prefix}.backend=vllm|openai{alternative}"
        needs = [package_need("transformers", remedy), package_need("torch", remedy)]
        if checkpoint:
            needs.append(weights_need(checkpoint, selection))
        return needs
    if backend == "openai":
        needs = [package_need("openai", f"pip install 'omnistory-core[judges]'{alternative}")]
        base_url = params.get("base_url")
        if not base_url:
            needs.append(
                Need(
                    "config",
                    f"{prefix}.base_url",
                    f"--set {prefix}.base_url=http://HOST:PORT/v1{alternative}",
                    detail=f"the openai backend of the {role} needs a server address",
                )
            )
        else:
            needs.append(
                Need(
                    "server",
                    str(base_url),
                    f"start the server (e.g. `vllm serve {checkpoint or 'MODEL'}`) or correct "
                    f"{prefix}.base_url{alternative}",
                )
            )
        env = params.get("api_key_env")
        if env:
            needs.append(Need("key", str(env), f"export {env}=<key> ({prefix}.api_key_env)"))
        return needs
    return [
        Need(
            "config",
            f"{prefix}.backend",
            f"--set {prefix}.backend=vllm|openai|transformers",
            detail=f"unknown backend {backend!r}",
        )
    ]


# -- checks ----------------------------------------------------------------------------------


def server_problem(base_url: str, timeout: float = SERVER_TIMEOUT_S) -> str | None:
    """None when anything answers HTTP at ``base_url`` (one request, no retry)."""
    # here, not at the top: plugins import this module when they register, and urllib.request
    # (http.client, email, ssl) costs every CLI process some 30 ms of CPU
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered: reachable (a wrong key or path shows when scoring)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"not reachable ({type(reason).__name__}: {reason})"


def missing_modules(modules: Iterable[str], python: str | None = None) -> set[str]:
    """The modules that cannot be imported here (or by ``python``); none is imported."""
    modules = sorted(set(modules))
    if not modules:
        return set()
    if python is None:
        out = set()
        for name in modules:
            try:
                if importlib.util.find_spec(name) is None:
                    out.add(name)
            except (ImportError, ValueError):
                out.add(name)
        return out
    code = (
        "import importlib.util, sys\n"
        "for m in sys.argv[1:]:\n"
        "    try:\n"
        "        found = importlib.util.find_spec(m) is not None\n"
        "    except (ImportError, ValueError):\n"
        "        found = False\n"
        "    if not found:\n"
        "        print(m)\n"
    )
    try:
        proc = subprocess.run(
            [python, "-c", code, *modules], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return set(modules)
    if proc.returncode != 0:
        return set(modules)
    return set(proc.stdout.split())


def _isolation(evaluator: Any) -> tuple[Any, str | None]:
    """(the component, the interpreter it runs under when isolated)."""
    inner = evaluator.__dict__.get("_component") if hasattr(evaluator, "__dict__") else None
    python = evaluator.__dict__.get("python") if inner is not None else None
    return (inner, str(python)) if inner is not None and python else (evaluator, None)


def as_need(declared: Any) -> Need:
    """A declared need: a :class:`Need`, or a mapping with its fields (what a plugin's
    evaluator returns: plugins import the core's contract, not this distribution)."""
    if isinstance(declared, Need):
        return declared
    return Need(
        str(declared["check"]),
        str(declared["target"]),
        str(declared.get("remedy") or ""),
        detail=str(declared.get("detail") or ""),
        warning=str(declared.get("warning") or ""),
    )


def evaluator_needs(evaluator: Any) -> list[Need]:
    component, python = _isolation(evaluator)
    declare: Callable[[], Iterable[Any]] | None = getattr(component, "preflight_needs", None)
    needs = [as_need(n) for n in declare()] if callable(declare) else []
    if python is not None:
        label = f"{component.kind}.{component.name}.runner.python"
        needs.insert(
            0,
            Need(
                "interpreter",
                python,
                f"create it with `python -m omnistory_core env create "
                f"{component.kind}={component.name}` or correct {label}",
            ),
        )
    return needs


def check_evaluator(
    evaluator: Any, servers: dict[str, str | None], *, network: bool = True
) -> list[Problem]:
    """Every problem of one evaluator (``servers`` memoizes URL probes across evaluators).

    ``network=False`` (the dry run) asks nothing over the network: a server is not probed (its
    problem says so) and a checkpoint is looked for in the local cache only."""
    from omnistory_core.kit.hub import checkpoint_state

    component, python = _isolation(evaluator)
    key = component.key()
    needs = evaluator_needs(evaluator)
    problems: list[Problem] = []
    python_ok = python is None or Path(python).exists()
    packages = [n.target for n in needs if n.check == "package"]
    absent = missing_modules(packages, python) if python_ok else set()
    for need in needs:
        detail: str | None = None
        if need.check == "interpreter" and not Path(need.target).exists():
            detail = "does not exist"
        elif need.check == "config":
            detail = need.detail or "invalid setting"
        elif need.check == "package" and need.target in absent:
            where = f" in {python}" if python else ""
            detail = f"not installed{where}"
        elif need.check == "weights":
            detail = checkpoint_state(need.target).problem if network else local_weights(need)
        elif need.check == "server" and not network:
            detail = NOT_PROBED
        elif need.check == "server":
            if need.target not in servers:
                servers[need.target] = server_problem(need.target)
            detail = servers[need.target]
        elif need.check == "key" and not os.environ.get(need.target):
            detail = "environment variable not set"
        if detail:
            problems.append(
                Problem(key, need.check, need.target, detail, need.remedy, need.warning)
            )
            if need.warning and need.on_problem is not None:
                need.on_problem(f"{need.check} {need.target}: {detail}")
    if not callable(getattr(component, "preflight_needs", None)):
        # an evaluator without declarations may still have the generation components' check
        check = getattr(component, "preflight", None)
        if callable(check):
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - reported in the table
                problems.append(Problem(key, "load", key, f"{type(exc).__name__}: {exc}", ""))
    return problems


def local_weights(need: Need) -> str | None:
    """A checkpoint's problem found without the network: absent from the local cache while the
    hub is switched off, or absent and not asked for (the evaluation would ask the hub)."""
    from omnistory_core.kit.hub import cached_snapshot, offline_variable

    if cached_snapshot(need.target) is not None:
        return None
    var = offline_variable()
    if var is not None:
        return f"not in the local cache and {var} is set"
    return NOT_ASKED


#: details of what a check without the network (the dry run's) leaves open
NOT_PROBED = "not probed (a dry run makes no network call)"
NOT_ASKED = "not in the local cache; the hub was not asked (a dry run makes no network call)"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def preflight(
    evaluators: Iterable[Any],
    *,
    network: bool = True,
    warn: Callable[[str], None] | None = _stderr,
) -> list[Problem]:
    """The blocking problems of all evaluators, in their order (``network``: see
    :func:`check_evaluator`).  The non-blocking ones go to ``warn``, one line per evaluator
    (default: stderr)."""
    servers: dict[str, str | None] = {}
    out: list[Problem] = []
    for evaluator in evaluators:
        problems = check_evaluator(evaluator, servers, network=network)
        out.extend(p for p in problems if p.blocking)
        soft = [p for p in problems if not p.blocking]
        if soft and warn is not None:
            warn(warning_line(soft))
    return out


def warning_line(problems: list[Problem]) -> str:
    """One line for an evaluator's non-blocking problems: what it means, why, the first remedy."""
    details = "; ".join(f"{p.check} {p.target}: {p.detail}" for p in problems)
    first = problems[0]
    return (
        f"omnistory evaluate: warning: {first.evaluator}: {first.warning} ({details}; remedy:"
        f" {first.remedy})"
    )


def causes_by_evaluator(problems: Iterable[Problem]) -> dict[str, str]:
    """evaluator key -> one-line cause, for the ``error`` rows of ``--allow-partial``."""
    out: dict[str, list[str]] = {}
    for p in problems:
        out.setdefault(p.evaluator, []).append(f"{p.check} {p.target}: {p.detail}")
    return {k: "cannot run: " + "; ".join(v) for k, v in out.items()}


def problems_table(problems: list[Problem]):
    """A ``rich.table.Table``: one row per problem, with its remedy."""
    from rich.table import Table

    table = Table(
        title=f"Evaluators that cannot run here ({len(problems)} problem(s))",
        header_style="bold",
        show_lines=True,
    )
    for name in ("evaluator", "check", "needs", "problem", "remedy"):
        table.add_column(name, overflow="fold")
    for p in problems:
        table.add_row(p.evaluator, p.check, p.target, p.detail, p.remedy)
    return table
