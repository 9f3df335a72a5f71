"""The sweep scheduler's placement rules (``omnistory_core.engine.placement.place``), one moment
at a time: warm devices first and generation before evaluation there, a first replica where
little is kept for the loaded models, one more replica only where the remaining work per
running replica outweighs a load (by the sweep's other components' times until its own are
measured), to its share of the devices while others ask, and not on a device kept for an idle
model with work to come, a pre-load only on a
device left over for a model loaded nowhere, a stage waiting for its busy warm device unless the
wait would cost more than a load, tensor-parallel stages gathering their devices; and the order
a parallel sweep's jobs start in (the launcher's ``spread_order``)."""

from __future__ import annotations

from omnistory_core.engine.placement import Ask, Grant, Measures, place

KEYS = frozenset(f"k{n}" for n in range(10))


def _ask(ident: int, component: str, keys=KEYS, replicas: int = 0, since: float = 0.0, **kw):
    kind = component.split("/")[0]
    return Ask(ident, component, f"spec-{component}", kind, keys=frozenset(keys),
               replicas=replicas, since=since, **kw)  # fmt: skip


def _warm(**devices: str) -> dict[str, frozenset[str]]:
    """``image_kontext="0,1"`` -> {"spec-image/kontext": {"0", "1"}}."""
    return {
        f"spec-{name.replace('_', '/', 1)}": frozenset(on.split(","))
        for name, on in devices.items()
    }


def test_a_free_device_goes_to_the_model_loaded_there_generation_first() -> None:
    judge = _ask(1, "judge/text", since=0.0)
    image = _ask(2, "image/kontext", since=5.0)
    grants = place(["0"], [judge, image], _warm(judge_text="0", image_kontext="0"), {},
                   Measures(), now=10.0)  # fmt: skip
    assert grants == [Grant(2, ("0",))]


def test_a_first_replica_goes_where_the_loaded_models_have_least_work_left() -> None:
    tts = _ask(1, "tts/parler")
    measures = Measures(
        call_s={"spec-image/kontext": 1.0, "spec-tts/voxcpm": 1.0},
        expected={"image/kontext": 10},  # kontext's plans are still being made
        components={"spec-image/kontext": "image/kontext", "spec-tts/voxcpm": "tts/voxcpm"},
    )
    # device 0 keeps kontext for ten calls to come; device 1's model has no work left
    grants = place(["0", "1"], [tts], _warm(image_kontext="0", tts_voxcpm="1"), {},
                   measures, now=0.0)  # fmt: skip
    assert grants == [Grant(1, ("1",))]


def test_one_more_replica_only_where_the_work_per_replica_outweighs_a_load() -> None:
    measures = Measures(call_s={"spec-image/dev": 1.0}, load_s={"image/dev": 5.0})
    # three calls left, one replica running: less than a load and a call
    few = _ask(1, "image/dev", keys={"a", "b", "c"}, replicas=1)
    assert place(["1"], [few], _warm(image_dev="0"), {}, measures, now=0.0) == []
    # ten calls left: the second replica pays for its load
    many = _ask(1, "image/dev", replicas=1)
    assert place(["1"], [many], _warm(image_dev="0"), {}, measures, now=0.0) == [Grant(1, ("1",))]
    # stages sharing calls count them once; the sweep's outlook counts the calls still to come
    shared = [_ask(1, "image/dev", keys={"a", "b"}, replicas=1), _ask(2, "image/dev", {"a", "b"})]
    assert place(["1"], shared, _warm(image_dev="0"), {}, measures, now=0.0) == []
    ahead = Measures(measures.call_s, measures.load_s, expected={"image/dev": 20})
    (grant,) = place(["1"], shared, _warm(image_dev="0"), {}, ahead, now=0.0)
    assert grant.devices == ("1",)
    # not measured yet: no second replica
    assert place(["1"], [many], _warm(image_dev="0"), {}, Measures(), now=0.0) == []


def test_a_component_not_measured_yet_spreads_by_the_sweep_s_other_times() -> None:
    # clip's first replica is loading (no call or load of clip measured); the experts' times
    # stand for its own: forty calls of a second outweigh a five-second load
    measures = Measures(call_s={"spec-image/dev": 1.0}, load_s={"image/dev": 5.0})
    clip = _ask(1, "metric/clip", keys={f"c{n}" for n in range(40)}, replicas=1)
    assert place(["1", "2"], [clip], {}, {}, measures, now=0.0) == [Grant(1, ("1",))]
    assert place(["2"], [clip], {}, {}, measures, now=0.0) == [Grant(1, ("2",))]
    assert place(["2"], [clip], {}, {}, Measures(), now=0.0) == []  # nothing measured at all


def test_spreading_leaves_a_device_to_a_loaded_model_with_work_to_come() -> None:
    """The evaluation's tail: the judge, loaded on device 1, has items about to be final (the
    outlook) but no stage asking this moment; clip spreads to the other free devices only."""
    measures = Measures(
        call_s={"spec-metric/clip": 1.0, "spec-judge/text": 1.0},
        load_s={"metric/clip": 5.0, "judge/text": 5.0},
        expected={"judge/text": 19},
        components={"spec-judge/text": "judge/text"},
    )
    warm = _warm(metric_clip="0", judge_text="1")
    clip = _ask(1, "metric/clip", keys={f"c{n}" for n in range(39)}, replicas=1)
    assert place(["1", "2", "3"], [clip], warm, {}, measures, now=0.0) == [Grant(1, ("2",))]
    assert place(["1", "3"], [clip], warm, {}, measures, now=0.0) == [Grant(1, ("3",))]
    assert place(["1"], [clip], warm, {}, measures, now=0.0) == []
    # the judge's stage asks: its device, warm
    judge = _ask(2, "judge/text", keys={f"j{n}" for n in range(19)})
    assert place(["1"], [clip, judge], warm, {}, measures, now=0.0) == [Grant(2, ("1",))]
    # no work left for the judge: clip may take its device too
    done = Measures(measures.call_s, measures.load_s, components=measures.components)
    clip = _ask(1, "metric/clip", keys={f"c{n}" for n in range(39)}, replicas=1)
    assert place(["1"], [clip], warm, {}, done, now=0.0) == [Grant(1, ("1",))]


def test_while_others_ask_a_component_spreads_to_its_share_of_the_devices() -> None:
    """The judge asks with all its twenty items, clip with the first few of its forty (the rest
    is a batch behind, in the outlook): the judge does not take every free device."""
    measures = Measures(
        call_s={"spec-metric/clip": 1.0, "spec-judge/text": 1.0},
        load_s={"metric/clip": 5.0, "judge/text": 5.0},
        expected={"metric/clip": 40},
    )
    judge = _ask(1, "judge/text", keys={f"j{n}" for n in range(20)}, replicas=1)
    clip = _ask(2, "metric/clip", keys={"c0"}, replicas=1)
    # four devices, a third of the work: one replica
    assert place(["2", "3"], [judge, clip], {}, {}, measures, now=0.0) == []
    # clip's next batch asks: it spreads to its share, three
    more = _ask(3, "metric/clip", keys={f"c{n}" for n in range(1, 40)})
    grants = place(["2", "3"], [judge, clip, more], {}, {}, measures, now=0.0)
    assert [g.ask for g in grants] == [3]
    assert [g.ask for g in place(["3"], [judge, clip, more], {}, {}, measures, now=0.0)] == [3]
    # alone, the judge spreads as its work per replica allows
    judge = _ask(1, "judge/text", keys={f"j{n}" for n in range(20)}, replicas=1)
    assert place(["2", "3"], [judge], {}, {}, measures, now=0.0) == [Grant(1, ("2",))]


def test_a_stage_waits_for_its_busy_warm_device_unless_that_costs_more_than_a_load() -> None:
    measures = Measures(
        call_s={"spec-image/dev": 1.0, "spec-tts/parler": 1.0}, load_s={"image/dev": 5.0}
    )
    holder = _ask(9, "tts/parler", keys={"x", "y"}, replicas=1)  # device 0: two seconds left
    waiting = _ask(1, "image/dev", since=0.0)
    warm = _warm(image_dev="0", tts_parler="0")
    assert place(["1"], [waiting, holder], warm, {"0": holder}, measures, now=1.0) == []
    # the holder has more work than a load takes: load it on the free device now
    long_holder = _ask(9, "tts/parler", replicas=1)
    grants = place(["1"], [waiting, long_holder], warm, {"0": long_holder}, measures, now=1.0)
    assert grants == [Grant(1, ("1",))]
    # or it has waited a load's time already
    grants = place(["1"], [waiting, holder], warm, {"0": holder}, measures, now=6.0)
    assert grants == [Grant(1, ("1",))]
    # less work than a load: it waits for its device however long (the free device goes to
    # the holder's second replica: parler's load not measured yet, dev's stands for it)
    short = _ask(1, "image/dev", keys={"a"}, since=0.0)
    grants = place(["1"], [short, long_holder], warm, {"0": long_holder}, measures, 99.0)
    assert grants == [Grant(9, ("1",))]


def test_a_tensor_parallel_stage_gets_its_devices_together() -> None:
    wide = _ask(1, "judge/big", need=2)
    narrow = _ask(2, "image/dev")
    # one free device: kept for the wide stage rather than given to the narrow one
    assert place(["0"], [wide, narrow], {}, {}, Measures(), now=0.0) == []
    assert place(["0", "1"], [wide, narrow], {}, {}, Measures(), now=0.0) == [Grant(1, ("0", "1"))]


def test_no_stage_gets_more_replicas_than_its_calls_keep_busy() -> None:
    one = _ask(1, "image/dev", keys={"a"})
    measures = Measures(call_s={"spec-image/dev": 1.0}, load_s={"image/dev": 0.0})
    assert place(["0", "1", "2"], [one], {}, {}, measures, now=0.0) == [Grant(1, ("0",))]


def test_a_pre_load_takes_a_device_no_stage_needs_for_a_model_loaded_nowhere() -> None:
    measures = Measures(expected={"image/dev": 10, "tts/parler": 10, "tts/voxcpm": 0})
    dev = _ask(1, "image/dev", keys=(), preload=True)
    # a stage with calls is placed first; the pre-load gets the device left over
    judge = _ask(2, "judge/text")
    assert place(["0", "1"], [dev, judge], {}, {}, measures, now=0.0) == [
        Grant(2, ("0",)),
        Grant(1, ("1",)),
    ]
    dev, judge = _ask(1, "image/dev", keys=(), preload=True), _ask(2, "judge/text")
    assert place(["0"], [dev, judge], {}, {}, measures, now=0.0) == [Grant(2, ("0",))]
    # loaded already (or loading, or its stage asks itself): nothing to pre-load
    again = _ask(1, "image/dev", keys=(), preload=True)
    assert place(["1"], [again], _warm(image_dev="0"), {}, measures, now=0.0) == []
    asking = _ask(3, "image/dev", replicas=1)
    assert place(["1"], [again, asking], {}, {}, measures, now=0.0) == []
    # two jobs pre-loading the same model: one load; no calls expected: none
    twice = [_ask(1, "tts/parler", (), preload=True), _ask(2, "tts/parler", (), preload=True)]
    assert place(["0", "1"], twice, {}, {}, measures, now=0.0) == [Grant(1, ("0",))]
    idle = _ask(1, "tts/voxcpm", keys=(), preload=True)
    assert place(["0"], [idle], {}, {}, measures, now=0.0) == []
    assert place(["0"], [idle], {}, {}, Measures(), now=0.0) == []


def test_the_jobs_that_start_first_cover_the_sweep_s_choices() -> None:
    """With the scheduler, a parallel sweep starts next the job with the most choices no job
    started before it has: both planners of the grid plan from the start."""
    from itertools import product

    from hydra_plugins.omnistory_launcher.launcher import spread_order

    grid = [
        [f"planner={p}", f"image={i}", f"tts={t}", "engine.devices=[0,1,2,3]"]
        for p, i, t in product(("claude", "gpt"), ("kontext", "dev"), ("parler", "voxcpm"))
    ]
    order = spread_order(grid)
    assert order == [0, 7, 1, 2, 3, 4, 5, 6]
    assert {grid[i][0] for i in order[:2]} == {"planner=claude", "planner=gpt"}
    # one choice per job: the sweep's order; no job is lost or started twice
    assert spread_order([["tts=parler"], ["tts=voxcpm"], ["tts=piper"]]) == [0, 1, 2]
    assert spread_order([["a=1"], ["a=1"]]) == [0, 1]
