"""One progress view for a whole ``-m`` sweep, whichever launcher runs its jobs.

The jobs of a sweep may run in the sweep's process, in parallel processes, on SLURM nodes or Ray
workers; what they share is the sweep directory.  So each job tells the view how it is doing in
files there (:class:`JobProgress`), and the process that launched the sweep draws the view from
them (:class:`SweepProgressView`, started by the sweep callback):

* ``<sweep>/.progress/job-<n>.plan.json`` (once, at the job's start): per component the keys of
  the calls the job will make, as the dry run plans them, with an expert's calls named by their
  upstream call and plan field (the same name in every job that shares the call);
* ``<sweep>/.progress/job-<n>.keys.json`` (as each expert stage starts): what those names turned
  out to be, now that the plans exist: the call's real key, or null where the plan failed and no
  call will be made;
* ``<sweep>/.progress/job-<n>.json`` (about once a second): the job's state, its current stage,
  and per component its calls made, cache hits, failures and model loads;
* ``<sweep>/.progress/job-<n>.config.json`` (once, at the job's start): its resolved config, for
  the sweep's watch (:mod:`omnistory_core.run.watch`).

Per component the view shows the calls made and still to do (the distinct planned calls of the
sweep, by real key wherever a job has said it, minus those made: each call is made once, by
whichever process takes its lock, so the sum over jobs counts it once), cache hits, failures,
the rate and an ETA; and in all, the jobs done, running, failed and not started.
``python -m omnistory_core progress SWEEP_DIR`` draws the same view from another terminal
(``--watch`` to follow it).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRESS_DIR = ".progress"
#: ``{"jobs": n}``: how many jobs the launcher was given (``hydra/launcher=omnistory`` writes it)
SWEEP_FILE = "sweep.json"


def announce_jobs(sweep_dir: str | Path, jobs: int) -> None:
    """Tell the view how many jobs the sweep has (a launcher that knows calls it)."""
    _write_json(Path(sweep_dir) / PROGRESS_DIR / SWEEP_FILE, {"jobs": jobs})


__all__ = [
    "PROGRESS_DIR",
    "SWEEP_FILE",
    "announce_jobs",
    "read_job_config",
    "write_job_config",
    "write_job_plan",
    "JobProgress",
    "SweepProgress",
    "SweepProgressView",
    "read_sweep_progress",
    "render_sweep_progress",
]


def _write_json(path: Path, data: Any) -> None:
    from omnistory_core.engine.store import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(data, sort_keys=True) + "\n").encode("utf-8"))


# -- the job's side ---------------------------------------------------------------------------
def write_job_plan(sweep_dir: str | Path, job: int, planned: Mapping[str, Iterable[str]]) -> None:
    """``job-<n>.plan.json``: the calls job ``n`` will make, per component (written by the job
    when it starts, and before that by a launcher that plans every job of the sweep up front)."""
    _write_json(
        Path(sweep_dir) / PROGRESS_DIR / f"job-{job}.plan.json",
        {"job": job, "components": {k: sorted(set(v)) for k, v in planned.items()}},
    )


def write_job_config(sweep_dir: str | Path, job: int, config: Mapping[str, Any]) -> None:
    """``job-<n>.config.json``: job ``n``'s resolved config, from which the sweep's watch plans
    the job without composing it again (:mod:`omnistory_core.run.watch`).  Not written when it
    holds a secret (the watch then does without it)."""
    from omnistory_core.redaction import redact

    if redact(dict(config)) != dict(config):
        return
    try:
        _write_json(Path(sweep_dir) / PROGRESS_DIR / f"job-{job}.config.json", dict(config))
    except (OSError, TypeError, ValueError):  # not JSON, or no disk: the watch does without
        pass


def read_job_config(sweep_dir: str | Path, job: int) -> dict[str, Any] | None:
    """What :func:`write_job_config` wrote for job ``n`` (None: nothing yet)."""
    path = Path(sweep_dir) / PROGRESS_DIR / f"job-{job}.config.json"
    try:
        return dict(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError):
        return None


class JobProgress:
    """What one job tells the sweep's view.  ``stats`` is the job's live per-component counts
    (the dict :func:`omnistory_core.engine.job.run_job` fills)."""

    def __init__(
        self,
        sweep_dir: str | Path,
        job: int,
        system_id: str,
        stats: Mapping[str, Any],
        interval_s: float = 1.0,
    ):
        self.dir = Path(sweep_dir) / PROGRESS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.job = job
        self.system_id = system_id
        self.stats = stats
        self.interval_s = interval_s
        self.path = self.dir / f"job-{job}.json"
        self.started = time.time()
        self.state = "running"
        self.stage: str | None = None
        self.resolved: dict[str, dict[str, str | None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="job-progress")
        self._write()
        self._thread.start()

    def planned(self) -> bool:
        """Whether this job's plan is written already (by a launcher that plans up front)."""
        return (self.dir / f"job-{self.job}.plan.json").exists()

    def describe(self, config: Mapping[str, Any]) -> None:
        """``job-<n>.config.json``: the job's resolved config (:func:`read_job_config`)."""
        write_job_config(self.dir.parent, self.job, config)

    def plan(self, planned: Mapping[str, Iterable[str]]) -> None:
        """The keys of the calls this job will make, per component (see the module docstring)."""
        write_job_plan(self.dir.parent, self.job, planned)

    def resolve(self, component: str, keys: Mapping[str, str | None]) -> None:
        """What the planned names of an expert stage's calls turned out to be: their real keys,
        or None where no call will be made (the plan failed)."""
        with self._lock:
            self.resolved.setdefault(component, {}).update(keys)
            data = {"job": self.job, "components": dict(self.resolved)}
        _write_json(self.dir / f"job-{self.job}.keys.json", data)

    def progress(self, label: str, total: int) -> Callable[[int], None]:
        """A ``progress(label, total) -> advance(n)`` for the job's stages (the label's last word
        is the component, e.g. ``image    image/dev``)."""
        with self._lock:
            self.stage = label.split()[-1] if label.split() else label
        return lambda n: None

    def close(self, state: str = "done") -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            self.state = state
            self.stage = None
        self._write()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write()

    def _write(self) -> None:
        with self._lock:
            data = {
                "job": self.job,
                "system_id": self.system_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "state": self.state,
                "stage": self.stage,
                "started": self.started,
                "updated": time.time(),
                "components": {
                    k: (s.to_dict() if hasattr(s, "to_dict") else dict(s))
                    for k, s in list(self.stats.items())
                },
            }
        try:
            _write_json(self.path, data)
        except OSError:  # a full or vanished disk must not stop the job itself
            pass


# -- the sweep's side --------------------------------------------------------------------------
@dataclass
class ComponentProgress:
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    loads: int = 0
    planned: int | None = None  # distinct calls planned (None: no job of it has a plan yet)

    @property
    def to_do(self) -> int | None:
        return None if self.planned is None else max(0, self.planned - self.calls)


@dataclass
class SweepProgress:
    components: dict[str, ComponentProgress] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)  # running / done / failed
    expected_jobs: int | None = None
    stages: list[tuple[str, str]] = field(default_factory=list)  # (system_id, component)
    #: the warm pool's model loads, per component and device (``<sweep>/.pool/loads.jsonl``)
    device_loads: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def not_started(self) -> int | None:
        if self.expected_jobs is None:
            return None
        return max(0, self.expected_jobs - sum(self.jobs.values()))


def read_sweep_progress(sweep_dir: str | Path, expected_jobs: int | None = None) -> SweepProgress:
    """The sweep's progress from its jobs' files (see the module docstring)."""
    folder = Path(sweep_dir) / PROGRESS_DIR
    if expected_jobs is None:  # the launcher may know better than the sweep's overrides
        try:
            expected_jobs = int(json.loads((folder / SWEEP_FILE).read_text("utf-8"))["jobs"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    out = SweepProgress(expected_jobs=expected_jobs)
    planned: dict[str, set[str]] = {}
    resolved: dict[str, dict[str, str | None]] = {}
    for path in sorted(folder.glob("job-*.keys.json")):
        for key, names in _components(path).items():
            resolved.setdefault(key, {}).update(names)
    for path in sorted(folder.glob("job-*.plan.json")):
        for key, keys in _components(path).items():
            names = resolved.get(key, {})
            planned.setdefault(key, set()).update(
                k for k in (names.get(n, n) for n in keys) if k is not None
            )
    for path in sorted(folder.glob("job-*.json")):
        if path.name.endswith((".plan.json", ".keys.json", ".config.json")):
            continue
        try:
            job = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        state = str(job.get("state", "running"))
        out.jobs[state] = out.jobs.get(state, 0) + 1
        if state == "running" and job.get("stage"):
            out.stages.append((str(job.get("system_id")), str(job["stage"])))
        for key, counts in (job.get("components") or {}).items():
            row = out.components.setdefault(key, ComponentProgress())
            row.calls += int(counts.get("calls", 0))
            row.cache_hits += int(counts.get("cache_hits", 0))
            row.failures += int(counts.get("failures", 0))
            row.loads += int(counts.get("loads", 0))
    for key, keys in planned.items():
        out.components.setdefault(key, ComponentProgress()).planned = len(keys)
    from omnistory_core.engine.pool import loads_by_device

    out.device_loads = loads_by_device(Path(sweep_dir) / ".pool")
    out.components = dict(sorted(out.components.items()))
    return out


#: plan and keys files as last read, by path: (mtime_ns, size, components).  The view redraws
#: every second and a 900-example sweep's plans are megabytes of keys that change once per stage
_READ: dict[Path, tuple[int, int, dict[str, Any]]] = {}


def _components(path: Path) -> dict[str, Any]:
    try:
        st = path.stat()
        cached = _READ.get(path)
        if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
            return cached[2]
        data = dict(json.loads(path.read_text("utf-8")).get("components") or {})
    except (OSError, ValueError, AttributeError):
        return {}
    _READ[path] = (st.st_mtime_ns, st.st_size, data)
    return data


class _Rates:
    """Calls per second per component over the last ``window_s`` seconds."""

    def __init__(self, window_s: float = 120.0):
        self.window_s = window_s
        self.samples: dict[str, list[tuple[float, int]]] = {}

    def add(self, now: float, progress: SweepProgress) -> None:
        for key, row in [*progress.components.items(), ("", _total(progress))]:
            samples = self.samples.setdefault(key, [])
            samples.append((now, row.calls))
            while len(samples) > 2 and now - samples[0][0] > self.window_s:
                samples.pop(0)

    def rate(self, key: str) -> float | None:
        samples = self.samples.get(key) or []
        if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
            return None
        made = samples[-1][1] - samples[0][1]
        return made / (samples[-1][0] - samples[0][0]) if made > 0 else None


def _total(progress: SweepProgress) -> ComponentProgress:
    rows = list(progress.components.values())
    known = [r.planned for r in rows]
    return ComponentProgress(
        calls=sum(r.calls for r in rows),
        cache_hits=sum(r.cache_hits for r in rows),
        failures=sum(r.failures for r in rows),
        loads=sum(r.loads for r in rows),
        planned=sum(p for p in known if p is not None) if rows and None not in known else None,
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def render_sweep_progress(
    progress: SweepProgress,
    title: str,
    elapsed_s: float | None = None,
    rates: _Rates | None = None,
) -> Any:
    """The view as a rich renderable (a table with a header line)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    def eta(key: str, row: ComponentProgress) -> str:
        if row.to_do == 0:
            return "done" if row.planned is not None else ""
        rate = rates.rate(key) if rates is not None else None
        return _duration(row.to_do / rate) if rate and row.to_do is not None else "?"

    table = Table(show_footer=True, box=None, pad_edge=False)
    total = _total(progress)
    columns = [
        ("component", "total"),
        ("calls done", f"{total.calls:,}"),
        ("to do", "?" if total.to_do is None else f"{total.to_do:,}"),
        ("cache hits", f"{total.cache_hits:,}"),
        ("failures", f"{total.failures:,}"),
        ("loads", f"{total.loads:,}"),
        ("calls/min", ""),
        ("ETA", eta("", total)),
    ]
    for n, (name, footer) in enumerate(columns):
        table.add_column(name, footer=footer, justify="left" if n == 0 else "right", no_wrap=n == 0)
    for key, row in progress.components.items():
        rate = rates.rate(key) if rates is not None else None
        table.add_row(
            key,
            f"{row.calls:,}",
            "?" if row.to_do is None else f"{row.to_do:,}",
            f"{row.cache_hits:,}",
            f"{row.failures:,}",
            f"{row.loads:,}",
            f"{rate * 60:,.1f}" if rate else "",
            eta(key, row),
        )
    jobs = progress.jobs
    parts = [f"{jobs.get('done', 0)} done", f"{jobs.get('running', 0)} running"]
    if jobs.get("failed"):
        parts.append(f"{jobs['failed']} failed")
    if progress.not_started:
        parts.append(f"{progress.not_started} not started")
    header = f"{title}: jobs {', '.join(parts)}"
    if elapsed_s is not None:
        header += f"; elapsed {_duration(elapsed_s)}"
    lines: list[Any] = [Text(header, style="bold"), table]
    if progress.stages:
        now = ", ".join(f"{s} ({c})" for s, c in progress.stages[:6])
        more = len(progress.stages) - 6
        lines.append(Text(f"now: {now}{f' and {more} more' if more > 0 else ''}", style="dim"))
    if progress.device_loads:
        per = "; ".join(
            f"{key} " + " ".join(f"{d}:{n}" for d, n in devices.items())
            for key, devices in progress.device_loads.items()
        )
        lines.append(Text(f"loads per device: {per}", style="dim"))
    if total.to_do is None and progress.components:
        lines.append(Text("to do: ? until every started job has written its plan", style="dim"))
    return Group(*lines)


class SweepProgressView:
    """Draws the view on stderr while the sweep runs: live on a terminal, otherwise one summary
    line every ``line_every_s`` seconds; the final table when it stops."""

    def __init__(
        self,
        sweep_dir: str | Path,
        title: str,
        expected_jobs: int | None = None,
        refresh_s: float = 1.0,
        line_every_s: float = 30.0,
    ):
        from rich.console import Console

        self.sweep_dir = Path(sweep_dir)
        self.title = title
        self.expected_jobs = expected_jobs
        self.refresh_s = refresh_s
        self.line_every_s = line_every_s
        self.console = Console(stderr=True)
        if not self.console.is_terminal:  # a log file: never cut a component's name short
            self.console = Console(stderr=True, width=140)
        self.rates = _Rates()
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None

    def _snapshot(self) -> SweepProgress:
        progress = read_sweep_progress(self.sweep_dir, self.expected_jobs)
        self.rates.add(time.time(), progress)
        return progress

    def _renderable(self) -> Any:
        return render_sweep_progress(
            self._snapshot(), self.title, time.time() - self.started, self.rates
        )

    def start(self) -> SweepProgressView:
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(
                self._renderable(),
                console=self.console,
                refresh_per_second=4,
                transient=False,
                # the lines jobs of this process log go above the view, not through it
                redirect_stdout=True,
                redirect_stderr=True,
            )
            self._live.start()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweep-progress")
        self._thread.start()
        return self

    def _loop(self) -> None:
        last_line = time.time()
        while not self._stop.wait(self.refresh_s):
            try:
                if self._live is not None:
                    self._live.update(self._renderable())
                elif time.time() - last_line >= self.line_every_s:
                    last_line = time.time()
                    self.console.print(self.summary_line(self._snapshot()), markup=False)
            except Exception:  # noqa: BLE001 - a file being replaced: next second
                continue

    def summary_line(self, progress: SweepProgress) -> str:
        total = _total(progress)
        rate = self.rates.rate("")
        to_do = "?" if total.to_do is None else f"{total.to_do:,}"
        eta = _duration(total.to_do / rate) if rate and total.to_do else "?"
        jobs = progress.jobs
        return (
            f"{self.title}: {total.calls:,} calls done, {to_do} to do, {total.cache_hits:,} cache"
            f" hits, {total.failures:,} failures; jobs {jobs.get('done', 0)} done,"
            f" {jobs.get('running', 0)} running; elapsed {_duration(time.time() - self.started)},"
            f" ETA {eta}"
        )

    def stop(self) -> SweepProgress:
        """Stop drawing and print the final table; returns the final progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        progress = self._snapshot()
        final = render_sweep_progress(progress, self.title, time.time() - self.started, self.rates)
        if self._live is not None:
            self._live.update(final)
            self._live.stop()
        else:
            self.console.print(final)
        return progress


def main(argv: list[str] | None = None) -> int:
    """``python -m omnistory_core progress SWEEP_DIR [--watch]``: the view of a sweep that runs
    elsewhere (SLURM, Ray, another terminal), from its files."""
    import argparse

    from rich.console import Console

    parser = argparse.ArgumentParser(
        prog="python -m omnistory_core progress",
        description="Progress of a -m sweep, from its directory (any launcher).",
    )
    parser.add_argument("sweep_dir", type=Path, help="the sweep directory (outputs/sweeps/NAME)")
    parser.add_argument("--watch", action="store_true", help="redraw every second until done")
    args = parser.parse_args(argv)
    if not (args.sweep_dir / PROGRESS_DIR).is_dir():
        print(
            f"omnistory: error: {args.sweep_dir} has no {PROGRESS_DIR}/ folder: not a sweep"
            " directory, or its jobs have not started",
            file=sys.stderr,
        )
        return 2
    title = f"sweep {args.sweep_dir.name}"
    if not args.watch:
        Console().print(render_sweep_progress(read_sweep_progress(args.sweep_dir), title))
        return 0
    from rich.live import Live

    rates = _Rates()
    with Live(console=Console(), refresh_per_second=2) as live:
        while True:
            progress = read_sweep_progress(args.sweep_dir)
            rates.add(time.time(), progress)
            live.update(render_sweep_progress(progress, title, rates=rates))
            if progress.jobs and not progress.jobs.get("running") and not progress.not_started:
                return 0
            time.sleep(1.0)
