"""Where the sweep's scheduler places replicas: a pure function of what it knows at one moment.

:func:`place` is handed the free devices, the stages asking for devices (:class:`Ask`: their
component, the calls they have not handed out yet, how many replicas they run), the devices where
each component is loaded in the warm pool, and what the sweep has measured (seconds per call and
per load).  It returns which stage gets which free device(s) now (:class:`Grant`):

1. **Warm first.**  A free device goes to a stage whose component is loaded there (no load), the
   most urgent first: generation before evaluation (evaluation reads what generation makes), then
   the component with the most remaining work per replica, then the stage waiting longest.
2. **A first replica** of a component that runs nowhere is placed on a free device, the one whose
   loaded models have the least work left (they keep their devices for it).  Where the component
   is loaded on a busy device, its stage waits for that device unless its remaining work
   outweighs a load and the wait would too (the busy device's remaining work by its measured call
   time; or it has waited a load's time): then it loads elsewhere.
3. **One more replica** of a component that runs already is placed only where the remaining work
   each running replica has outweighs a load: ``remaining / replicas > load + one call``
   (seconds; the remaining work is the component's distinct calls not yet handed out, over every
   stage asking, and its expected calls still to come when the sweep says so, by its measured call
   time), the condition for the component to finish sooner despite the new replica's load.  So a
   component with less work left than one load is never spread.  Until its own calls and load
   are measured (its first replica still loading), the sweep's other components' mean times
   stand for them; with nothing measured at all, none is added.  The new replica does not take
   a free device kept for another model: one where a model that runs nowhere is loaded and has
   work left (asked for, or in the outlook: an evaluator whose next items are about to be
   final), so that its stage, when it asks, finds its model loaded rather than every device
   taken by one component's spread.  While other components ask for devices too, it spreads to
   at most its share of the devices, in proportion to its share of their remaining work.

4. **A pre-load** (an ask with ``preload``: a job whose expert waits for its first plans) takes
   a device that is still free after the stages with calls were placed, for a component loaded
   nowhere, running nowhere, asked for by no stage with calls, and with calls still expected
   (the sweep's outlook): the load that component's first replica will need happens while the
   plans are being made instead of after them.  Rule 1 then gives that device to the stage.

A stage never gets more replicas than its calls would keep busy (``ceil(calls / batch_size)``).
A tensor-parallel component (``need`` devices per replica) gets its devices together: a stage
that waits for several keeps the ones that free up, so single-device stages cannot starve it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["GENERATION_KINDS", "Ask", "Grant", "Measures", "place"]

#: kinds whose outputs later stages read: they go first on a device both could use
GENERATION_KINDS = frozenset({"planner", "backbone", "image", "tts"})


@dataclass
class Ask:
    """One stage asking for devices: ``keys``, its calls not handed out yet (short key prefixes:
    stages sharing calls name them alike); ``replicas``, devices sets it holds now."""

    id: int
    component: str  # kind/name
    spec: str  # what the warm pool calls a replica of it (component, version, parameters)
    kind: str
    need: int = 1
    batch: int = 1
    keys: frozenset[str] = frozenset()
    replicas: int = 0
    since: float = 0.0  # when it started waiting
    #: no calls yet: one replica to load the component before its stage asks (rule 4)
    preload: bool = False

    def wants_more(self) -> bool:
        if self.preload:
            return self.replicas == 0
        return bool(self.keys) and self.replicas < math.ceil(len(self.keys) / max(1, self.batch))


@dataclass
class Measures:
    """What the sweep measured: seconds per call (by spec) and per load (by component), and the
    calls each component is still expected to make beyond those asked for (by component)."""

    call_s: Mapping[str, float] = field(default_factory=dict)
    load_s: Mapping[str, float] = field(default_factory=dict)
    expected: Mapping[str, int] = field(default_factory=dict)
    #: spec -> component, for the loaded models no stage asks for now
    components: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Grant:
    ask: int
    devices: tuple[str, ...]


def _mean(values: Iterable[float]) -> float | None:
    known = list(values)
    return sum(known) / len(known) if known else None


def _remaining(
    spec: str, asks: Sequence[Ask], measures: Measures, call_s: float | None = None
) -> float | None:
    """Seconds of work left for ``spec`` (None: its call time is not measured yet; ``call_s``:
    the time to count a call at instead of the measured one)."""
    call_s = call_s if call_s is not None else measures.call_s.get(spec)
    if call_s is None:
        return None
    mine = [a for a in asks if a.spec == spec]
    calls = len(frozenset().union(*(a.keys for a in mine))) if mine else 0
    component = mine[0].component if mine else measures.components.get(spec, "")
    return max(calls, measures.expected.get(component, 0)) * call_s


def _urgency(ask: Ask, asks: Sequence[Ask], running: Mapping[str, int], measures: Measures):
    left = _remaining(ask.spec, asks, measures) or 0.0
    share = left / (running.get(ask.spec, 0) + 1)
    return (ask.kind in GENERATION_KINDS, share, -ask.since)


def _busy_for(
    device: str, holders: Mapping[str, Ask], asks: Sequence[Ask], measures: Measures
) -> float | None:
    """How long ``device``'s holder will keep it (None: not known)."""
    holder = holders.get(device)
    if holder is None:
        return 0.0
    call_s = measures.call_s.get(holder.spec)
    if call_s is None:
        return None
    return len(holder.keys) * call_s / max(1, holder.replicas)


def place(
    free: Sequence[str],
    asks: Sequence[Ask],
    warm: Mapping[str, frozenset[str]],
    holders: Mapping[str, Ask],
    measures: Measures,
    now: float,
) -> list[Grant]:
    """The grants to make now (see the module docstring).  ``warm``: spec -> devices where it
    is loaded; ``holders``: device -> the stage holding it."""
    free = list(free)
    running: dict[str, int] = {}
    for ask in asks:
        running[ask.spec] = running.get(ask.spec, 0) + ask.replicas
    grants: list[Grant] = []

    def grant(ask: Ask, devices: Sequence[str]) -> None:
        for device in devices:
            free.remove(device)
        ask.replicas += 1
        running[ask.spec] = running.get(ask.spec, 0) + 1
        grants.append(Grant(ask.id, tuple(devices)))

    def order() -> list[Ask]:
        waiting = [a for a in asks if a.wants_more() and not a.preload]
        return sorted(waiting, key=lambda a: _urgency(a, asks, running, measures), reverse=True)

    # 1. warm first
    changed = True
    while changed and free:
        changed = False
        for ask in order():
            here = [d for d in free if d in warm.get(ask.spec, frozenset())]
            if len(here) >= ask.need:
                grant(ask, here[: ask.need])
                changed = True
                break
    # a tensor-parallel stage waiting longest keeps the devices that free up for it, and gets
    # them before any single-device stage once there are enough
    wide = [a for a in order() if a.need > 1 and running.get(a.spec, 0) == 0]
    wide.sort(key=lambda a: a.since)
    if wide and len(free) < wide[0].need:
        return grants
    # 2. and 3. cold devices: a first replica, or one more where it pays for its load
    for ask in wide[:1] + [a for a in order() if a not in wide[:1]]:
        if len(free) < ask.need or not ask.wants_more():
            continue
        loaded_on = warm.get(ask.spec, frozenset())
        kept: set[str] = set()
        if running.get(ask.spec, 0) == 0:
            if loaded_on and not _load_elsewhere(ask, loaded_on, holders, asks, measures, now):
                continue
        else:
            # not measured yet for this component: the sweep's other components' times (a
            # first replica's load would otherwise keep every other device idle meanwhile)
            call_s = measures.call_s.get(ask.spec) or _mean(measures.call_s.values())
            load_s = measures.load_s.get(ask.component) or _mean(measures.load_s.values())
            if load_s is None or call_s is None:
                continue
            left = _remaining(ask.spec, asks, measures, call_s) or 0.0
            if left / running[ask.spec] <= load_s + call_s:
                continue  # the replicas running finish it sooner than a load and a call
            devices = len(free) + sum(running.values())
            if running[ask.spec] >= _fair_share(ask, asks, measures, devices):
                continue  # the other components asking now need the devices left
            kept = _kept_for_idle(ask, free, warm, asks, running, measures)
            if len([d for d in free if d not in kept]) < ask.need:
                continue
        free.sort(key=lambda d: (d in kept, _kept_for(d, warm, asks, measures)))
        grant(ask, free[: ask.need])
    # 4. pre-loads, on the devices no stage with calls took
    asked = {a.spec for a in asks if not a.preload}
    for ask in sorted((a for a in asks if a.preload and a.wants_more()), key=lambda a: a.since):
        if len(free) < ask.need or ask.spec in asked or warm.get(ask.spec):
            continue
        if running.get(ask.spec, 0) or measures.expected.get(ask.component, 0) <= 0:
            continue
        free.sort(key=lambda d: _kept_for(d, warm, asks, measures))
        grant(ask, free[: ask.need])
    return grants


def _load_elsewhere(
    ask: Ask,
    loaded_on: frozenset[str],
    holders: Mapping[str, Ask],
    asks: Sequence[Ask],
    measures: Measures,
    now: float,
) -> bool:
    """Whether a stage whose component is loaded only on busy devices should load it on a free
    one now: when its remaining work outweighs a load, and those devices stay busy longer than
    a load takes or it has waited a load's time already.  While its call and load times are not
    known (its first load is not done), it waits."""
    load_s = measures.load_s.get(ask.component)
    left = _remaining(ask.spec, asks, measures)
    if load_s is None or left is None or left <= load_s:
        return False  # less work than a load: it waits for a device where it is loaded
    waits = [_busy_for(d, holders, asks, measures) for d in loaded_on]
    known = [w for w in waits if w is not None]
    if known and min(known) > load_s:
        return True
    return now - ask.since >= load_s


def _fair_share(ask: Ask, asks: Sequence[Ask], measures: Measures, devices: int) -> int:
    """The most replicas ``ask``'s component spreads to while other components ask for devices
    too: the devices in proportion to its share of their remaining work (at least one).  A
    stage asking for a few calls stands for its component's work to come (an evaluator's next
    items, a batch behind), so the first component to ask does not take every device."""
    call_guess = _mean(measures.call_s.values()) or 1.0
    work: dict[str, float] = {}
    for other in asks:
        if other.preload or not other.keys or other.spec in work:
            continue
        call_s = measures.call_s.get(other.spec, call_guess)
        work[other.spec] = _remaining(other.spec, asks, measures, call_s) or 0.0
    total = sum(work.values())
    if len(work) < 2 or total <= 0:
        return devices  # no other component asks: every device
    return max(1, round(devices * work.get(ask.spec, 0.0) / total))


def _kept_for_idle(
    ask: Ask,
    free: Sequence[str],
    warm: Mapping[str, frozenset[str]],
    asks: Sequence[Ask],
    running: Mapping[str, int],
    measures: Measures,
) -> set[str]:
    """Free devices ``ask`` should not spread to: for each other model that runs nowhere but
    has work left (asked for, or to come by the sweep's outlook: an evaluator whose next items
    are about to be final), one free device where it is loaded.  Taking that device too would make
    the model load elsewhere, or wait for this component's last call, when it asks."""
    kept: set[str] = set()
    for spec, loaded_on in warm.items():
        on = loaded_on & frozenset(free)
        if spec == ask.spec or running.get(spec, 0) or not on or on & kept:
            continue
        component = next((a.component for a in asks if a.spec == spec), None)
        component = component or measures.components.get(spec, "")
        asked = any(a.spec == spec and a.keys for a in asks)
        if asked or measures.expected.get(component, 0) > 0:
            kept.add(min(on))
    return kept


def _kept_for(device: str, warm: Mapping[str, frozenset[str]], asks, measures) -> float:
    """The work waiting for the models loaded on ``device`` (a cold replica goes where least
    is kept for them)."""
    return sum(_remaining(spec, asks, measures) or 0.0 for spec, on in warm.items() if device in on)
