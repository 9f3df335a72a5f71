"""Where a sweep's device time goes: per device, each model load, call and idle gap, from the
stand-ins' logs (``omnistory_testkit.standins``: every call and load notes its start, end and
``CUDA_VISIBLE_DEVICES``; a call its inputs' and outputs' content digests, as call keys read
them).

A call is *ready* from the moment its inputs exist: the end of the first call that output each
of them (a plan's field for an expert, the stored image, speech or narration for an evaluator),
the sweep's start for inputs no call makes (the dataset's).  Every moment a device neither loads
nor calls is idle for one cause, decided over the whole sweep at that moment:

* ``waiting for a stage barrier``: a ready call is not being made anywhere and its component is
  busy on no device (the order of the stages holds it: stage-major jobs, an evaluation that
  starts after the last job, one evaluator after another);
* ``not worth a load``: ready calls wait, but each of their components is busy on another
  device (one more replica here would first cost a load);
* ``waiting for plans``: calls remain, none of them ready (their plans, or for an evaluator its
  item's outputs, are still being made; the sweep's start-up counts here too);
* ``no work``: no call of the sweep remains (its end: the report, shutting the pool down).

``loading`` is the device time spent in loads.  Used by ``devices_scaling.py --timeline``.
"""

from __future__ import annotations

import bisect
import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

LOADING = "loading"
BARRIER = "waiting for a stage barrier"
NOT_WORTH = "not worth a load"
PLANS = "waiting for plans"
NO_WORK = "no work"
#: the causes of device time without a call, in the order they are printed
CAUSES = (LOADING, PLANS, BARRIER, NOT_WORTH, NO_WORK)


@dataclass(frozen=True)
class Span:
    """One stretch of one device's time: a ``load`` or ``call`` of a component, or ``idle``
    for a cause; times in seconds since the sweep started."""

    device: str
    kind: str
    start: float
    end: float
    component: str = ""
    cause: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _devices_of(entry: dict) -> list[str]:
    """The devices a call or load used (none for a component that needs no GPU, even in a
    process pinned to one)."""
    if entry.get("gpus", 1) == 0:
        return []
    return [d for d in str(entry.get("devices") or "").split(",") if d]


def ready_times(calls: Sequence[dict], t0: float) -> list[float]:
    """When each call's inputs existed (see the module docstring), per call in order."""
    made: dict[str, float] = {}
    for call in calls:
        for output in call.get("outputs") or ():
            made[output] = min(made.get(output, call["end"]), call["end"])
    return [max([t0, *(made.get(i, t0) for i in call.get("inputs") or ())]) for call in calls]


def _merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _covers(intervals: list[tuple[float, float]], t: float) -> bool:
    """Whether sorted, disjoint ``intervals`` cover ``t``."""
    n = bisect.bisect_right(intervals, (t, float("inf"))) - 1
    return n >= 0 and intervals[n][0] <= t < intervals[n][1]


def _causes(
    calls: Sequence[dict], loads: Sequence[dict], t0: float, t1: float
) -> list[tuple[float, float, str]]:
    """The cause of idleness over the whole sweep, piecewise: (start, end, cause)."""
    gpu = [c for c in calls if _devices_of(c)]
    ready = ready_times(calls, t0)
    gpu_ready = [r for c, r in zip(calls, ready, strict=True) if _devices_of(c)]
    busy: dict[str, list[tuple[float, float]]] = {}
    for entry in [*gpu, *loads]:
        busy.setdefault(entry["component"], []).append((entry["start"], entry["end"]))
    running = {component: _merge(spans) for component, spans in busy.items()}
    cuts = {t0, t1, *gpu_ready, *(c["start"] for c in gpu)}
    cuts |= {t for spans in running.values() for span in spans for t in span}
    points = sorted(t for t in cuts if t0 <= t <= t1)
    out: list[tuple[float, float, str]] = []
    for a, b in zip(points, points[1:], strict=False):
        if b <= a:
            continue
        mid = (a + b) / 2
        waiting = [c for c, r in zip(gpu, gpu_ready, strict=True) if r <= mid < c["start"]]
        if any(not _covers(running.get(c["component"], []), mid) for c in waiting):
            cause = BARRIER
        elif waiting:
            cause = NOT_WORTH
        elif any(c["start"] > mid for c in gpu):
            cause = PLANS
        else:
            cause = NO_WORK
        if out and out[-1][2] == cause and out[-1][1] == a:
            out[-1] = (out[-1][0], b, cause)
        else:
            out.append((a, b, cause))
    return out


def device_spans(
    calls: Sequence[dict], loads: Sequence[dict], devices: Sequence[str], t0: float, t1: float
) -> list[Span]:
    """Every device's loads, calls and idle gaps (by cause) from ``t0`` to ``t1`` (epoch
    seconds), as :class:`Span` s relative to ``t0``.  A call or load without a start (an older
    log) is left out."""
    calls = [c for c in calls if c.get("start") is not None]
    loads = [e for e in loads if e.get("start") is not None]
    causes = _causes(calls, loads, t0, t1)
    spans: list[Span] = []
    for device in devices:
        mine = [
            (e["start"], e["end"], kind, e["component"])
            for kind, entries in (("load", loads), ("call", calls))
            for e in entries
            if device in _devices_of(e)
        ]
        spans.extend(Span(device, k, s - t0, e - t0, c) for s, e, k, c in sorted(mine))
        cursor = t0
        for start, end in [*_merge((s, e) for s, e, _, _ in mine), (t1, t1)]:
            for a, b, cause in causes:
                lo, hi = max(a, cursor), min(b, start)
                if hi > lo:
                    spans.append(Span(device, "idle", lo - t0, hi - t0, cause=cause))
            cursor = max(cursor, end)
    return sorted(spans, key=lambda s: (s.device, s.start, s.kind))


def seconds_by_cause(spans: Iterable[Span]) -> dict[str, float]:
    """Device-seconds without a call, per cause (loading included), in :data:`CAUSES` order."""
    totals = dict.fromkeys(CAUSES, 0.0)
    for span in spans:
        if span.kind == "load":
            totals[LOADING] += span.seconds
        elif span.kind == "idle":
            totals[span.cause] += span.seconds
    return totals


def call_seconds(spans: Iterable[Span]) -> float:
    return sum(s.seconds for s in spans if s.kind == "call")


def write_csv(path: Path, spans: Sequence[Span]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["device", "kind", "component", "cause", "start_s", "end_s", "seconds"])
        for s in spans:
            writer.writerow(
                [
                    s.device,
                    s.kind,
                    s.component,
                    s.cause,
                    f"{s.start:.3f}",
                    f"{s.end:.3f}",
                    f"{s.seconds:.3f}",
                ]
            )


#: idle causes are pale, loads grey; calls take a colour per component
_IDLE_COLOURS = {
    PLANS: "#fde0a6",
    BARRIER: "#f4a6a6",
    NOT_WORTH: "#c9b6e4",
    NO_WORK: "#e6e6e6",
}


def write_png(path: Path, spans: Sequence[Span], title: str) -> None:
    """A Gantt chart: one row per device, loads, calls (by component) and idle gaps (by cause)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    devices = sorted({s.device for s in spans}, key=lambda d: (len(d), d))
    components = sorted({s.component for s in spans if s.kind == "call"})
    palette = plt.get_cmap("tab10")
    colour = {c: palette(n % 10) for n, c in enumerate(components)}
    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.7 * len(devices)))
    for row, device in enumerate(devices):
        for s in (s for s in spans if s.device == device):
            if s.kind == "idle":
                face, hatch = _IDLE_COLOURS[s.cause], None
            elif s.kind == "load":
                face, hatch = "#7f7f7f", "//"
            else:
                face, hatch = colour[s.component], None
            ax.broken_barh(
                [(s.start, s.seconds)],
                (row - 0.4, 0.8),
                facecolors=face,
                edgecolor="white" if s.kind == "call" else face,
                linewidth=0.3,
                hatch=hatch,
            )
    ax.set_yticks(range(len(devices)), [f"device {d}" for d in devices])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the sweep started")
    ax.set_title(title, fontsize=9)
    handles = [Patch(facecolor=colour[c], label=c) for c in components]
    handles.append(Patch(facecolor="#7f7f7f", hatch="//", label=LOADING))
    handles += [Patch(facecolor=f, label=c) for c, f in _IDLE_COLOURS.items()]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=6, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
