"""check_component: it passes a component that keeps the contract and names the check, the
component and the fix for one that breaks it.  Every class here is a real component run through
the engine (a metric or judge through the evaluation runner); each broken one breaks exactly one
rule."""

from __future__ import annotations

import json
import random
import textwrap
import uuid
from typing import Any

import pytest
from omnistory_testkit import ConformanceError, ConformanceReport, check_component

from omnistory_core.components import (
    Backbone,
    BackboneOutput,
    EvalResult,
    Metric,
    Planner,
    PlannerResponse,
)
from omnistory_core.contract import Failure
from omnistory_core.data.demo import load_demo
from omnistory_core.params import Param


def _plan(narration: str) -> str:
    return json.dumps(
        {
            "narration": narration,
            "image_prompt": f"a picture of {narration}",
            "speech": {
                "utterance": "Look!",
                "speaker": "Pip",
                "emotion": "happy",
                "speed": "normal",
                "pitch": "normal",
                "gender": "male",
            },
        }
    )


class GoodPlanner(Planner):
    """Deterministic, declares its parameters, loads once, reads two example inputs."""

    name = "good_planner"
    version = "1"
    reads = ("current_text", "conditions")
    parameters = (
        Param("style", str, "plain", "narration style", choices=("plain", "shouting")),
        Param("repeat", int, 1, "how often the instruction is repeated", ge=1),
        Param("delay_s", float, 0.0, "simulated latency", runtime=True, ge=0),
    )

    def load(self) -> None:
        self.rng = random.Random(self.params["seed"])

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        goal = str(item["conditions"].get("text_instruction") or item["current_text"])
        text = " ".join([goal] * self.params["repeat"])
        if self.params["style"] == "shouting":
            text = text.upper()
        return PlannerResponse(_plan(f"{text} ({self.rng.randint(0, 999)})"))


def test_a_component_that_keeps_the_contract_passes_every_check() -> None:
    report = check_component(GoodPlanner)
    assert isinstance(report, ConformanceReport)
    assert report.component == "planner/good_planner" and report.version == "1"
    assert report.passed == [
        "identity",
        "reads",
        "light_import",
        "outputs",
        "cache",
        "runtime_params (delay_s)",
        "output_params (repeat, seed, style)",
        "deterministic",
        "failures (through run_one)",
    ]
    assert report.skipped == {}
    assert report.calls == {"first run": 2, "second run, same store": 0}
    assert "ok       cache" in str(report)


def test_parameters_are_passed_to_the_component() -> None:
    # style=shouting is valid and the run succeeds; an unknown key is the engine's refusal
    assert "outputs" in check_component(GoodPlanner, style="shouting").passed
    with pytest.raises(ConformanceError, match="outputs: the engine refused.*tempo"):
        check_component(GoodPlanner, tempo=3)


class ReadsTheAnswer(GoodPlanner):
    name = "reads_the_answer"
    reads = ("current_text", "conditions", "next_image")


def test_reads_outside_the_vocabulary_fail() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(ReadsTheAnswer)
    message = str(info.value)
    assert message.startswith("check_component(planner/reads_the_answer): reads:")
    assert "['next_image'] not in the inputs a planner may read" in message
    assert "current_image, current_text, metadata, conditions" in message


class EagerLoader(GoodPlanner):
    """Loads its model when built: every run, even a fully cached one, pays for the load."""

    name = "eager_loader"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.load()


def test_loading_on_every_run_fails() -> None:
    with pytest.raises(ConformanceError, match=r"cache: load\(\) ran 1 time\(s\) during a fully"):
        check_component(EagerLoader)


class GuardedLoad(GoodPlanner):
    """Calls its idempotent load() before every batch, as API clients do: allowed, since a run
    with nothing to compute never calls run_batch."""

    name = "guarded_load"

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        return [self.run_one(item) for item in items]


def test_an_idempotent_load_in_run_batch_is_fine() -> None:
    assert "cache" in check_component(GuardedLoad).passed


class Nondeterministic(GoodPlanner):
    """Samples from an unseeded generator: a rerun gives other outputs."""

    name = "nondeterministic"

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        return PlannerResponse(_plan(f"The fox found {uuid.uuid4().hex[:6]} grapes."))


def test_nondeterministic_output_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(Nondeterministic)
    message = str(info.value)
    assert "deterministic: demo example" in message
    assert "the same parameters and seed gave different results in two runs" in message
    assert "text: " in message and "self.params['seed']" in message


HEAVY_PLUGIN = '''
"""A plugin module that imports torch when it is imported: plugin discovery pays for it."""
import torch  # noqa: F401

from omnistory_core.components import (
    Backbone,
    BackboneOutput,
    EvalResult,
    Metric,
    Planner,
    PlannerResponse,
)
from omnistory_core.contract import Failure
from omnistory_core.data.demo import load_demo


class HeavyPlanner(Planner):
    name = "heavy_planner"
    version = "1"
    reads = ("current_text",)

    def run_one(self, item):
        return PlannerResponse(item["current_text"])
'''


def test_a_heavy_import_at_module_import_fails(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "heavy_plugin_module.py").write_text(textwrap.dedent(HEAVY_PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    from heavy_plugin_module import HeavyPlanner

    with pytest.raises(ConformanceError) as info:
        check_component(HeavyPlanner)
    message = str(info.value)
    assert message.startswith("check_component(planner/heavy_planner): light_import:")
    assert "importing heavy_plugin_module imports torch" in message
    assert "heavy_plugin_module.py:3" in message  # the line that imported it
    assert "import heavy libraries inside load()" in message


class ReturnsADict(GoodPlanner):
    name = "returns_a_dict"

    def run_one(self, item: dict[str, Any]) -> Any:
        return json.loads(_plan("a plan as a dict"))


def test_an_output_of_the_wrong_type_fails() -> None:
    with pytest.raises(ConformanceError, match="outputs: demo example .* failed: contract_error: "):
        check_component(ReturnsADict)
    with pytest.raises(ConformanceError, match="returned dict for its result, expected a Planner"):
        check_component(ReturnsADict)


class RuntimeInKey(GoodPlanner):
    """Declares delay_s runtime but puts every parameter in its key."""

    name = "runtime_in_key"

    def output_params(self) -> dict[str, Any]:
        return dict(sorted(self.params.items()))


def test_a_runtime_parameter_in_the_cache_key_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(RuntimeInKey)
    message = str(info.value)
    assert "runtime_params: changing runtime parameter(s) {'delay_s': 0.5}" in message
    assert "delay_s: 0.0 then 0.5" in message


class KeyWithoutParameters(GoodPlanner):
    name = "key_without_parameters"

    def output_params(self) -> dict[str, Any]:
        return {}


def test_an_output_parameter_outside_the_cache_key_fails() -> None:
    with pytest.raises(ConformanceError, match="output_params: changing repeat from 1 to 2 keeps"):
        check_component(KeyWithoutParameters)


class UnstableKey(GoodPlanner):
    """Keeps a per-instance session id among its output parameters."""

    name = "unstable_key"

    def output_params(self) -> dict[str, Any]:
        return {**super().output_params(), "session": id(self)}


def test_a_cache_key_that_changes_between_runs_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(UnstableKey)
    message = str(info.value)
    assert "cache: a second run over the same store computed 2 of 2 items again" in message
    assert "output_params() differ: session:" in message


class SwallowsFailures(GoodPlanner):
    """Turns an item's exception into a placeholder plan: a failure disguised as an output."""

    name = "swallows_failures"

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        out = []
        for item in items:
            try:
                out.append(self.run_one(item))
            except Exception:  # noqa: BLE001 - the bug under test
                out.append(PlannerResponse(_plan("Something happened.")))
        return out


def test_a_failure_turned_into_a_placeholder_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(SwallowsFailures)
    message = str(info.value)
    assert "failures: run_one() raised for one item but no failure was recorded" in message
    assert "never as a placeholder output" in message


class NoVersion(Planner):
    name = "no_version"
    reads = ("current_text",)

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        return PlannerResponse(item["current_text"])


class BadName(NoVersion):
    name = "bad name"
    version = "1"


def test_identity_needs_a_name_and_a_version_of_its_own() -> None:
    with pytest.raises(ConformanceError, match="identity: no version of its own"):
        check_component(NoVersion)
    with pytest.raises(ConformanceError, match="identity: name 'bad name' must be"):
        check_component(BadName)


class HalfOmni(Backbone):
    """T+I: narration and an image, and the speech plan for the TTS expert.  With ``lose`` it
    drops the image (recorded as a failure) on the examples whose text contains that word."""

    name = "half_omni"
    version = "1"
    produces = frozenset({"text", "image"})
    reads = ("current_text", "conditions")
    parameters = (Param("lose", str, "", "drop the image where the page text has this word"),)

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        from PIL import Image

        out = BackboneOutput(
            text=f"{item['current_text']} Then the moon came back.",
            image=Image.new("RGB", (8, 8), (len(item["current_text"]) % 256, 0, 0)),
            plan={"speech": json.loads(_plan("unused"))["speech"]},
        )
        if self.params["lose"] and self.params["lose"] in item["current_text"]:
            out.image = None
            out.failures["image"] = Failure("model_error", "no image tokens")
        return out


class MakesNoImage(HalfOmni):
    name = "makes_no_image"

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        out = super().run_one(item)
        out.image = None
        return out


class GivesNoSpeechPlan(HalfOmni):
    name = "gives_no_speech_plan"

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        out = super().run_one(item)
        out.plan = None
        return out


def test_a_backbone_with_its_expert_passes_and_notes_an_example_without_image() -> None:
    report = check_component(HalfOmni)
    assert "outputs" in report.passed and report.notes == []
    first_text = load_demo(limit=1)[0].current.text
    word = first_text.split()[0]
    report = check_component(HalfOmni, lose=word)
    assert "outputs" in report.passed
    assert len(report.notes) == 1 and "model_error: no image tokens" in report.notes[0]


def test_a_backbone_that_never_makes_a_declared_modality_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(MakesNoImage)
    message = str(info.value)
    assert "outputs: no demo example has image although the backbone declares it" in message
    assert "backbone_no_image" in message


def test_a_backbone_that_never_gives_its_expert_a_plan_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(GivesNoSpeechPlan)
    message = str(info.value)
    assert "outputs: no demo example has speech; a backbone without speech must return" in message
    assert "the tts expert could not run on the backbone's plan" in message


# -- metrics and judges: a tiny built-in run on the demo, scored through the evaluation runner ----


class GoodMetric(Metric):
    """Word-overlap share of the gold narration: deterministic, declares its parameters, loads
    once, keeps its scores in 0-1."""

    name = "good_metric"
    version = "1"
    track = "text"
    criteria = ("share",)
    reads = ("candidate_text", "reference_text")
    score_range = (0.0, 1.0)
    parameters = (
        Param("lowercase", bool, True, "compare words case-insensitively"),
        Param("device", str, "cpu", "where the model runs", runtime=True),
    )

    def load(self) -> None:
        self.model = "loaded"

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        def words(text: str) -> set[str]:
            return set((text.lower() if self.params["lowercase"] else text).split())

        ours, gold = words(item["candidate_text"]), words(item["reference_text"])
        return EvalResult(scores={"share": len(ours & gold) / max(1, len(gold))})


def test_a_metric_that_keeps_the_contract_passes_every_check() -> None:
    report = check_component(GoodMetric)
    assert report.component == "metric/good_metric"
    assert report.passed == [
        "identity",
        "reads",
        "light_import",
        "outputs",
        "cache",
        "runtime_params (device)",
        "output_params (lowercase, seed)",
        "deterministic",
        "failures (through run_one)",
    ]
    assert report.skipped == {
        "unreadable_input": "the evaluator reads no candidate image or speech"
    }
    assert report.calls == {"first evaluation": 2, "second evaluation, same store": 0}


class GoodImageMetric(Metric):
    """Area ratio of the generated and the gold image; an unreadable file is an invalid row."""

    name = "good_image_metric"
    version = "1"
    track = "image"
    criteria = ("area_ratio",)
    reads = ("candidate_image", "reference_image")

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            try:
                ours, gold = (item[k].open_image() for k in ("candidate_image", "reference_image"))
            except OSError as exc:
                out.append(self.unreadable(exc))
                continue
            area = ours.size[0] * ours.size[1] / (gold.size[0] * gold.size[1])
            out.append(EvalResult(scores={"area_ratio": area}))
        return out

    def unreadable(self, exc: OSError) -> EvalResult:
        return EvalResult({"area_ratio": None}, status="invalid", detail={"error": str(exc)})


def test_an_image_metric_scores_an_unreadable_candidate_as_invalid() -> None:
    report = check_component(GoodImageMetric, score_range=(0, 10))
    assert report.passed[-2:] == [
        "failures (through run_batch)",
        "unreadable_input (candidate_image)",
    ]
    assert "outputs.score_range" not in report.skipped


class CrashesOnAnUnreadableImage(GoodImageMetric):
    """Keeps the exception object in its detail: the store cannot write it and the whole
    evaluation dies on one unreadable file."""

    name = "crashes_on_an_unreadable_image"

    def unreadable(self, exc: OSError) -> EvalResult:
        return EvalResult({"area_ratio": None}, status="invalid", detail={"error": exc})


def test_a_metric_that_crashes_the_evaluation_on_one_example_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(CrashesOnAnUnreadableImage)
    message = str(info.value)
    assert message.startswith(
        "check_component(metric/crashes_on_an_unreadable_image): unreadable_input:"
    )
    assert "the evaluation crashed (TypeError:" in message and "not JSON serializable" in message


class ScoresGarbage(GoodImageMetric):
    """Gives an unreadable file the worst score instead of saying it could not score it."""

    name = "scores_garbage"

    def unreadable(self, exc: OSError) -> EvalResult:
        return EvalResult({"area_ratio": 0.0})


def test_a_metric_that_scores_an_unreadable_file_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(ScoresGarbage)
    message = str(info.value)
    assert "unreadable_input: its candidate_image (generated.png) does not decode, yet" in message
    assert "area_ratio = 0.0" in message and "never as a placeholder score" in message


class EagerMetric(GoodMetric):
    """Loads its model when built: a fully scored sweep still pays for the load."""

    name = "eager_metric"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.load()


def test_a_metric_that_loads_on_a_cached_evaluation_fails() -> None:
    with pytest.raises(ConformanceError, match=r"cache: load\(\) ran 1 time\(s\) during a fully"):
        check_component(EagerMetric)


class NoisyMetric(GoodMetric):
    """Adds unseeded noise: the same sweep scored twice gives two leaderboards."""

    name = "noisy_metric"

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        return EvalResult(scores={"share": random.random()})


def test_a_nondeterministic_metric_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(NoisyMetric)
    message = str(info.value)
    assert "deterministic: template-copy-noop / demo example" in message
    assert "share was ('ok', " in message and "self.params['seed']" in message


class BatchWideInvalid(GoodMetric):
    """Turns one item's exception into an invalid result for its whole batch."""

    name = "batch_wide_invalid"
    default_batch_size = 8

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        try:
            return [self.run_one(item) for item in items]
        except Exception as exc:  # noqa: BLE001 - the bug under test
            return [EvalResult({"share": None}, "invalid", {"error": str(exc)}) for _ in items]


def test_one_items_failure_copied_to_its_batch_fails() -> None:
    with pytest.raises(ConformanceError) as info:
        check_component(BatchWideInvalid)
    assert "failures: run_one() raised for one item but 2 examples carry its error" in str(
        info.value
    )


class BatchDependent(GoodMetric):
    """Scores an item by how many batch-mates it has: alone (after a batch-mate failed) it gets
    another score, the kind of leak between items the check exists for."""

    name = "batch_dependent"
    default_batch_size = 8

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        scored = [self.run_one(item) for item in items]
        for result in scored:
            result.scores = {"share": 1.0 / len(items)}
        return scored


class BatchRounding(GoodMetric):
    """Alone, an item's score differs from its batched score in the last bits only (a batched
    matmul sums in another order): not a leak."""

    name = "batch_rounding"
    default_batch_size = 8

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        scored = [self.run_one(item) for item in items]
        if len(items) > 1:
            for result in scored:
                result.scores = {"share": (result.scores["share"] or 0.0) * (1 - 1e-12)}
        return scored


def test_a_score_that_depends_on_the_batch_fails_and_float_rounding_does_not() -> None:
    with pytest.raises(ConformanceError, match="failures: one example's failure changed its"):
        check_component(BatchDependent)
    check_component(BatchRounding)


class OutOfRange(GoodMetric):
    name = "out_of_range"

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        return EvalResult(scores={"share": 1.5})


class WrongCriteria(GoodMetric):
    name = "wrong_criteria"

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        return EvalResult(scores={"overlap": 0.5})


class NoCriteria(GoodMetric):
    name = "no_criteria"
    criteria = ()


def test_scores_outside_the_range_or_the_criteria_and_a_metric_without_criteria_fail() -> None:
    with pytest.raises(ConformanceError, match="outputs: .* share = 1.5 is outside the declared"):
        check_component(OutOfRange)
    with pytest.raises(ConformanceError, match=r"keys \['overlap'\] are not the criteria"):
        check_component(WrongCriteria)
    with pytest.raises(ConformanceError, match="identity: criteria \\(\\) must be a non-empty"):
        check_component(NoCriteria)


HEAVY_METRIC = '''
"""A metric module that imports torch when it is imported."""
import torch  # noqa: F401

from omnistory_core.components import EvalResult, Metric


class HeavyMetric(Metric):
    name = "heavy_metric"
    version = "1"
    track = "text"
    criteria = ("length",)
    reads = ("candidate_text",)

    def run_one(self, item):
        return EvalResult(scores={"length": float(len(item["candidate_text"]))})
'''


def test_a_metric_with_a_heavy_import_at_module_import_fails(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "heavy_metric_module.py").write_text(textwrap.dedent(HEAVY_METRIC))
    monkeypatch.syspath_prepend(str(tmp_path))
    from heavy_metric_module import HeavyMetric

    with pytest.raises(ConformanceError) as info:
        check_component(HeavyMetric)
    message = str(info.value)
    assert message.startswith("check_component(metric/heavy_metric): light_import:")
    assert "heavy_metric_module.py:3" in message


def test_a_judge_against_a_fake_openai_server_passes() -> None:
    from omnistory_eval.judges import CRITERIA
    from omnistory_eval.judges.judge import Qwen3TextJudge
    from omnistory_testkit import FakeServer, Reply

    verdict = json.dumps({c: {"score": 7, "rationale": "it follows"} for c in CRITERIA["text"]})
    with FakeServer(lambda body: Reply(text=verdict)) as server:
        report = check_component(
            Qwen3TextJudge,
            backend="openai",
            base_url=server.openai_base_url,
            model="local-judge",
            repair=False,
        )
        asked = len(server.requests_for("chat"))
    assert {check.split()[0] for check in report.passed} >= {
        "identity",
        "outputs",
        "cache",
        "runtime_params",
        "deterministic",
        "failures",
    }
    # every runtime parameter the judge declares is varied and leaves the key alone
    [runtime] = [c for c in report.passed if c.startswith("runtime_params")]
    varied = set(runtime.removeprefix("runtime_params (").removesuffix(")").split(", "))
    assert {"backend", "base_url", "model", "repair", "timeout", "max_retries"} <= varied
    # 2 examples in two stores, 1 neighbour of the raising item; nothing asked when cached
    assert asked == 5, asked


class SpeechDuration(Metric):
    """Seconds of the generated speech; a WAV that does not decode raises (an item exception the
    runner records as an invalid row)."""

    name = "speech_duration"
    version = "1"
    track = "speech"
    criteria = ("seconds",)
    reads = ("candidate_speech",)
    score_range = (0.0, 60.0)

    def run_one(self, item: dict[str, Any]) -> EvalResult:
        import soundfile as sf

        info = sf.info(item["candidate_speech"].path)
        return EvalResult(scores={"seconds": info.frames / info.samplerate})


def test_a_speech_metric_records_an_unreadable_wav_as_a_row() -> None:
    report = check_component(SpeechDuration)
    assert report.passed[-1] == "unreadable_input (candidate_speech)"
    assert report.skipped == {"runtime_params": "the evaluator declares no runtime parameters"}


def test_a_metric_parameter_the_engine_refuses_is_named() -> None:
    with pytest.raises(
        ConformanceError, match=r"outputs: the engine refused the evaluator: .*tempo"
    ):
        check_component(GoodMetric, tempo=3)


# -- the plugin's hook module ---------------------------------------------------------------------

MISSPELT_HOOK = """
from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_planner(register):  # the spec is register_planners
    from {package}.planner import HookedPlanner

    register(HookedPlanner)
"""

HOOKED_PLANNER = """
import json

from omnistory_core.components import Planner, PlannerResponse


class HookedPlanner(Planner):
    name = "hooked_planner"
    version = "1"
    reads = ("current_text",)
    parameters = ()

    def run_one(self, item):
        return PlannerResponse(json.dumps({"narration": item["current_text"]}))
"""


def _hook_module(source: str, name: str) -> Any:
    import types

    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


def test_a_hook_module_that_does_not_validate_fails_identity() -> None:
    module = _hook_module(
        """
        from omnistory_core.hookspecs import hookimpl

        @hookimpl
        def register_tts_expert(register):
            raise AssertionError("a misspelt hook is never called")
        """,
        "omnistory_misspelt_hooks",
    )
    with pytest.raises(ConformanceError) as info:
        check_component(GoodPlanner, plugin_module=module)
    message = str(info.value)
    assert message.startswith("check_component(planner/good_planner): identity:")
    assert "plugin module 'omnistory_misspelt_hooks' does not validate" in message
    assert "unknown hook 'register_tts_expert' (did you mean 'register_tts_experts'?)" in message


def test_a_hook_module_that_validates_passes() -> None:
    module = _hook_module(
        """
        from omnistory_core.hookspecs import hookimpl

        @hookimpl
        def register_planners(register):
            register(GoodPlanner)
        """,
        "omnistory_good_hooks",
    )
    module.GoodPlanner = GoodPlanner
    report = check_component(GoodPlanner, plugin_module=module)
    assert report.passed[0] == "identity"


def test_the_installed_plugins_hook_module_is_found_and_checked(tmp_path, monkeypatch) -> None:
    # a real installed distribution (a .dist-info with its entry point) on sys.path: the class
    # is imported from it, and check_component finds the hook module through the entry point
    from test_plugin_isolation import _install

    package = f"omnistory_hooked_{uuid.uuid4().hex[:8]}"
    _install(
        tmp_path,
        package.replace("_", "-"),
        "0.1.0",
        package,
        {
            f"{package}/__init__.py": MISSPELT_HOOK.format(package=package),
            f"{package}/planner.py": HOOKED_PLANNER,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.invalidate_caches()
    cls = importlib.import_module(f"{package}.planner").HookedPlanner
    with pytest.raises(ConformanceError) as info:
        check_component(cls)
    message = str(info.value)
    assert f"identity: the plugin module {package!r} does not validate" in message
    assert "unknown hook 'register_planner' (did you mean 'register_planners'?)" in message
