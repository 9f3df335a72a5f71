"""The ViStoryBench baseline systems through the real command line, with tiny random FLUX.1
checkpoints the tests build (``plugins/omnistory-flux/tests/flux_tiny.py``) and a chat planner
against a local OpenAI-protocol server:

* ``system=planner_flux_dev``: the template planner's image prompt is the official merged prompt;
  ``planner=gpt`` rewrites each shot instead, and two systems of a sweep share its calls;
* ``system=kontext_first_ref``: Kontext edits each shot's first onstage reference (a blank canvas
  when none), pixel for pixel what the inner expert makes of that image;
* ``system=story_kontext``: one call per story, each shot edited from the previous one; a shot
  whose plan or whose image fails is recorded alone and the chain goes on.

Every run is followed by a re-run from the store where the test is about caching.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from omnistory_testkit import FakeServer, LocalChatServer, Reply, run_cli
from omnistory_vistorybench.dataset import fixture_root, load_stories, shot_records
from omnistory_vistorybench.layout import RunKey, read_outputs
from omnistory_vistorybench.planning import (
    PROMPT_DIGEST,
    SYSTEM_PROMPT,
    plan_image_prompt,
    render_shot_text,
    shot_planner_class,
)
from omnistory_vistorybench.systems import blank_canvas
from PIL import Image

from omnistory_core.api import ConfigError, Media
from omnistory_core.kit.jobs import CallRecord, item_key, load_plugins

pytest.importorskip("diffusers", reason="the FLUX experts need diffusers")
pytest.importorskip("omnistory_flux", reason="the systems wrap omnistory-flux's experts")
FLUX_TESTS = Path(__file__).resolve().parents[2] / "omnistory-flux" / "tests"
if not (FLUX_TESTS / "flux_tiny.py").is_file():  # pragma: no cover - a partial checkout
    pytest.skip(f"no tiny FLUX builder at {FLUX_TESTS}", allow_module_level=True)
sys.path.insert(0, str(FLUX_TESTS))

from flux_tiny import TINY, build_tiny_flux  # noqa: E402  # pyright: ignore[reportMissingImports]

FIXTURE = fixture_root()
FULL = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}
QUIET = ("engine.progress=false",)
KEY_ENV = "VISTORY_TEST_PLANNER_KEY"


# -- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_flux(tmp_path_factory.mktemp("ckpt") / "tiny-flux-dev", "dev")


@pytest.fixture(scope="module")
def tiny_kontext(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_flux(tmp_path_factory.mktemp("ckpt") / "tiny-flux-kontext", "kontext")


def flux_args(model: Path | None = None) -> tuple[str, ...]:
    """The tiny generation settings as overrides of the image node (and its model)."""
    args = tuple(f"image.{k}={v}" for k, v in TINY.items())
    return (*args, f"image.model={model}") if model is not None else args


def kontext_args(model: Path) -> tuple[str, ...]:
    # the reference is encoded at its own size (256 px), not at a 1024 px training resolution
    return (*flux_args(model), "image.auto_resize=false")


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    done = run_cli(*args, *QUIET, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def job_dir(cwd: Path, system: str, dataset: str = "vistory_fixture") -> Path:
    """The one job directory of ``system``: the tiny checkpoints' sizes (``image.steps=...``)
    are output-changing settings, so the run's mode (and its directory) is derived from them."""
    root = cwd / "outputs" / "runs" / dataset
    found = [d for d in root.iterdir() if d.name == system or d.name.startswith(f"{system}-")]
    assert len(found) == 1, found
    return found[0]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def rows_of(job: Path) -> dict[str, dict[str, Any]]:
    lines = (job / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def calls(job: Path) -> dict[str, dict[str, int]]:
    return read_json(job / "stats.json")["components"]


def the_run(job: Path) -> tuple[RunKey, dict[str, list[int]]]:
    runs = read_outputs(job / "outputs")
    assert len(runs) == 1, list(runs)
    [(key, output)] = runs.items()
    return key, {story: sorted(out.shots) for story, out in output.stories.items()}


def merged_prompts(root: Path = FIXTURE) -> dict[str, str]:
    """The official merged prompt of every shot (``story_prompt_merge``)."""
    return {r.id: r.prompt for r in shot_records(load_stories(root))}


def first_reference(shot_id: str, root: Path = FIXTURE) -> Path:
    story = {s.id: s for s in load_stories(root)}[shot_id[:2]]
    shot = story.shot(int(shot_id[3:]))
    return story.characters[shot.character_keys[0]].images[0]


def pixels(image: Any) -> np.ndarray:
    picture = image if isinstance(image, Image.Image) else Image.open(image)
    return np.asarray(picture.convert("RGB"), dtype=np.int16)


def media(path: Path) -> Media:
    return Media(str(path), "unused")


class Kontext:
    """The inner expert in this process, with the CLI runs' settings: what each shot should be."""

    def __init__(self, model: Path):
        from omnistory_flux.experts import FluxKontext

        self.expert = FluxKontext(model=str(model), auto_resize=False, seed=0, **TINY)
        self.expert.load()

    def __call__(self, prompt: str, image: Media) -> np.ndarray:
        [out] = self.expert.run_batch([{"image_prompt": prompt, "current_image": image}])
        assert isinstance(out, Image.Image), out
        return pixels(out)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to one grey level (the pipeline's float math may round differently across
    processes); a different conditioning image moves pixels by far more."""
    return a.shape == b.shape and int(np.abs(a - b).max()) <= 1


def plot_of(body: dict[str, Any]) -> tuple[str, str]:
    """The (story id, shot index) and plot line of a planner request sent to the server."""
    text = next(p["text"] for p in body["messages"][1]["content"] if p["type"] == "text")
    where = re.search(r"^Shot (\d+) of story (\d+)$", text, re.M)
    plot = re.search(r"^Plot: (.*)$", text, re.M)
    assert where and plot, text
    return f"{where.group(2)}_{int(where.group(1)):02d}", plot.group(1)


def planner_answer(body: dict[str, Any], broken: frozenset[str] = frozenset()) -> Reply:
    """The server's plan for one shot: the image prompt is "A picture: <plot>"; a shot in
    ``broken`` gets a plan without its image prompt and speech."""
    shot, plot = plot_of(body)
    if shot in broken:
        return Reply(text=json.dumps({"narration": plot}))
    plan = {
        "narration": plot,
        "image_prompt": f"A picture: {plot}",
        "speech": {
            "speaker": "Narrator",
            "utterance": "Look.",
            "emotion": "neutral",
            "speed": "normal",
            "pitch": "normal",
            "gender": "female",
        },
    }
    return Reply(text=json.dumps(plan))


def gpt_args(server: FakeServer) -> tuple[str, ...]:
    return ("planner=gpt", f"planner.base_url={server.base_url}", f"planner.api_key_env={KEY_ENV}")


# -- planner -> FLUX.1-dev ----------------------------------------------------------------------


def test_planner_flux_dev_draws_the_merged_prompt_and_a_rerun_makes_no_call(
    tmp_path: Path, tiny_dev: Path
) -> None:
    args = ("dataset=vistory_fixture", "system=planner_flux_dev", *flux_args(tiny_dev))
    run(tmp_path, *args)
    job = job_dir(tmp_path, "planner_flux_dev")
    key, shots = the_run(job)
    assert (key.method, key.language) == ("planner_flux_dev", "en")
    assert key.mode.startswith("base-")  # derived from the tiny model's settings
    assert shots == FULL
    merged = merged_prompts()
    rows = rows_of(job)
    assert sorted(rows) == sorted(merged)
    from omnistory_flux.experts import FluxDev

    dev = FluxDev(model=str(tiny_dev), seed=0, **TINY)
    for shot, row in rows.items():
        assert row["status"] == "ok" and (job / row["path"]).is_file()
        assert row["image_prompt"] == merged[shot] and row["plan_key"]
        # the image call is FLUX.1-dev on exactly the merged prompt
        assert row["call_key"] == item_key(dev, {"image_prompt": merged[shot]})
    stats = calls(job)
    assert stats["planner/template"] == {"calls": 9, "cache_hits": 0, "failures": 0, "loads": 1}
    assert stats["image/dev"]["calls"] == 9
    manifest = read_json(job / "manifest.json")
    assert manifest["stages"] == ["planner", "image"]
    assert manifest["components"]["planner"]["name"] == "template"
    assert manifest["components"]["planner"]["reads"] == ["shot_prompt"]
    assert manifest["components"]["image"]["name"] == "dev"
    assert manifest["paradigm"] == "orchestration"

    run(tmp_path, *args)
    again = calls(job)
    assert again["planner/template"] == {"calls": 0, "cache_hits": 9, "failures": 0, "loads": 0}
    assert again["image/dev"] == {"calls": 0, "cache_hits": 9, "failures": 0, "loads": 0}
    assert the_run(job) == (key, shots)


def test_a_chat_planner_writes_the_prompts_and_two_systems_of_a_sweep_share_its_calls(
    tmp_path: Path, tiny_dev: Path, tiny_kontext: Path
) -> None:
    env = {
        KEY_ENV: "sk-local-test",
        # each system's expert finds its own tiny checkpoint (one sweep, two image experts)
        "OMNISTORY_MODEL_IMAGE_DEV": str(tiny_dev),
        "OMNISTORY_MODEL_IMAGE_KONTEXT": str(tiny_kontext),
    }
    with LocalChatServer(planner_answer) as server:
        run(
            tmp_path,
            "-m",
            "system=planner_flux_dev,kontext_first_ref",
            "dataset=vistory_fixture",
            "dataset.stories=[2]",
            *gpt_args(server),
            *flux_args(),
            "evaluation.report=false",
            env=env,
        )
        # the recorded request bodies (decoded JSON)
        requests = cast(list[dict[str, Any]], list(server.requests))
    # story 02 has three shots: three planner calls for the two systems together
    assert len(requests) == 3
    sweep = tmp_path / "outputs" / "sweeps" / "vistory_fixture"
    # one story, a chat planner and the tiny settings: each job's folder names what it changed
    [first] = sweep.glob("planner_flux_dev-base-p*-stories02")
    [second] = sweep.glob("kontext_first_ref-base-p*-stories02")
    assert calls(first)["planner/gpt"]["calls"] == 3
    assert calls(second)["planner/gpt"] == {"calls": 0, "cache_hits": 3, "failures": 0, "loads": 0}
    for job in (first, second):
        assert the_run(job)[1] == {"02": FULL["02"]}
    plots = dict(plot_of(body) for body in requests)
    for job in (first, second):
        for shot, row in rows_of(job).items():
            assert row["status"] == "ok" and row["image_prompt"] == f"A picture: {plots[shot]}"

    # what the planner was sent: the shot's fields and merged prompt, its first reference image
    # (a blank one when nobody is onstage) and the Plan schema as structured output
    merged = merged_prompts()
    by_shot = {plot_of(body)[0]: body for body in requests}
    for shot, body in by_shot.items():
        assert body["model"] == "gpt-5.4" and body["response_format"]["type"] == "json_schema"
        system, user = body["messages"]
        assert system == {"role": "system", "content": SYSTEM_PROMPT}
        image = next(p for p in user["content"] if p["type"] == "image_url")["image_url"]["url"]
        text = next(p for p in user["content"] if p["type"] == "text")["text"]
        assert merged[shot] in text
        sent = base64.b64decode(image.split(",", 1)[1])
        if shot == "02_03":  # nobody onstage
            assert image.startswith("data:image/png") and "blank" in text
            assert (pixels(Image.open(io.BytesIO(sent))) == 255).all()
        else:
            assert sent == first_reference(shot).read_bytes()
    # the Kontext system drew the planner's prompt on the first reference
    manifest = read_json(second / "manifest.json")
    assert manifest["components"]["image"]["params"]["inner"] == "image/kontext"
    assert manifest["components"]["planner"]["params"]["prompt_sha256"] == PROMPT_DIGEST


# -- FLUX.1-Kontext, per shot and per story -------------------------------------------------------


def test_kontext_first_ref_edits_the_first_reference_or_a_blank_canvas(
    tmp_path: Path, tiny_kontext: Path
) -> None:
    args = ("dataset=vistory_fixture", "system=kontext_first_ref", *kontext_args(tiny_kontext))
    run(tmp_path, *args)
    job = job_dir(tmp_path, "kontext_first_ref")
    key, shots = the_run(job)
    assert key.method == "kontext_first_ref" and shots == FULL  # no shot is left out
    assert calls(job)["image/first_ref"]["calls"] == 9
    rows, merged, kontext = rows_of(job), merged_prompts(), Kontext(tiny_kontext)
    # 01_01 and 02_03 have nobody onstage: a white canvas of the output size
    canvas = blank_canvas(TINY["width"], TINY["height"])
    for shot in ("01_01", "01_04", "02_03"):
        image = canvas if shot in ("01_01", "02_03") else media(first_reference(shot))
        assert same(pixels(job / rows[shot]["path"]), kontext(merged[shot], image)), shot
    # the reference matters: 01_04 is not what the canvas gives
    assert not same(pixels(job / rows["01_04"]["path"]), kontext(merged["01_04"], canvas))
    manifest = read_json(job / "manifest.json")
    image = manifest["components"]["image"]
    assert image["name"] == "first_ref" and image["params"]["inner"] == "image/kontext"
    assert image["params"]["steps"] == TINY["steps"]

    run(tmp_path, *args)
    assert calls(job)["image/first_ref"] == {"calls": 0, "cache_hits": 9, "failures": 0, "loads": 0}


def test_story_kontext_is_one_call_per_story_each_shot_from_the_previous(
    tmp_path: Path, tiny_kontext: Path
) -> None:
    args = ("dataset=vistory_fixture", "system=story_kontext", *kontext_args(tiny_kontext))
    run(tmp_path, *args)
    job = job_dir(tmp_path, "story_kontext")
    key, shots = the_run(job)
    assert key.method == "story_kontext" and shots == FULL
    assert calls(job)["image/sequential"] == {
        "calls": 2,
        "cache_hits": 0,
        "failures": 0,
        "loads": 1,
    }
    rows, merged, kontext = rows_of(job), merged_prompts(), Kontext(tiny_kontext)
    written = {shot: job / row["path"] for shot, row in rows.items()}
    # story 02: shot 1 edits Captain Bo's reference, shots 2 and 3 the shot before them
    assert same(pixels(written["02_01"]), kontext(merged["02_01"], media(first_reference("02_01"))))
    assert same(pixels(written["02_02"]), kontext(merged["02_02"], media(written["02_01"])))
    assert same(pixels(written["02_03"]), kontext(merged["02_03"], media(written["02_02"])))
    # not the reference: shot 2 conditioned on its own first reference looks otherwise
    own = kontext(merged["02_02"], media(first_reference("02_02")))
    assert not same(pixels(written["02_02"]), own)
    # story 01 starts with nobody onstage: a blank canvas, then the chain (shot 6 is not in it)
    canvas = blank_canvas(TINY["width"], TINY["height"])
    assert same(pixels(written["01_01"]), kontext(merged["01_01"], canvas))
    assert same(pixels(written["01_07"]), kontext(merged["01_07"], media(written["01_05"])))
    # the story's shots share one call (and its key)
    assert len({rows[s]["call_key"] for s in rows if s.startswith("01")}) == 1

    run(tmp_path, *args)
    again = calls(job)["image/sequential"]
    assert again["calls"] == 0 and again["loads"] == 0


def test_a_failed_shot_is_recorded_alone_and_the_story_goes_on(
    tmp_path: Path, tiny_kontext: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "ViStory", data / "ViStory")
    # Captain Bo's first reference is smaller than Kontext's 16-pixel grid: the shots that
    # would edit it fail in the expert
    Image.new("RGB", (8, 8), (200, 30, 30)).save(data / "ViStory/02/image/Captain Bo/00.jpg")
    args = (
        "system=story_kontext",
        "dataset=vistory",
        f"dataset.root={data}",
        *kontext_args(tiny_kontext),
    )
    env = {KEY_ENV: "sk-local-test"}
    with LocalChatServer(lambda body: planner_answer(body, broken=frozenset({"01_03"}))) as server:
        run(tmp_path, *args, *gpt_args(server), env=env)
        job = job_dir(tmp_path, "story_kontext", "vistory")
        rows = rows_of(job)
        # the plan of 01_03 has no image prompt: that shot is not drawn, the others of the story
        # are, in one call
        assert rows["01_03"]["status"] == "failure"
        assert rows["01_03"]["category"] == "plan_missing_field"
        assert rows["01_03"]["image_prompt"] is None
        # 02_01 and 02_02 edit the too-small reference (nothing succeeded before them)
        for shot in ("02_01", "02_02"):
            assert rows[shot]["status"] == "failure" and rows[shot]["category"] == "model_error"
            assert "16-pixel grid" in rows[shot]["message"]
        ok = {s for s, r in rows.items() if r["status"] == "ok"}
        assert ok == {"01_01", "01_02", "01_04", "01_05", "01_07", "02_03"}
        assert the_run(job)[1] == {"01": [1, 2, 4, 5, 7], "02": [3]}
        stats = read_json(job / "stats.json")
        assert stats["missing"] == {"image": {"model_error": 2, "plan_missing_field": 1}}
        assert stats["components"]["image/sequential"]["calls"] == 2
        missing = (job / "missing.txt").read_text().splitlines()
        assert [line.split("\t")[:3] for line in missing] == [
            ["01_03", "image", "plan_missing_field"],
            ["02_01", "image", "model_error"],
            ["02_02", "image", "model_error"],
        ]
        # 01_04 is conditioned on 01_02 (01_03 is not in the chain); 02_03 (nobody onstage,
        # nothing succeeded before it) on a blank canvas
        kontext = Kontext(tiny_kontext)
        prompts = {s: r["image_prompt"] for s, r in rows.items()}
        shot_04 = pixels(job / rows["01_04"]["path"])
        assert same(shot_04, kontext(prompts["01_04"], media(job / rows["01_02"]["path"])))
        canvas = blank_canvas(TINY["width"], TINY["height"])
        assert same(pixels(job / rows["02_03"]["path"]), kontext(prompts["02_03"], canvas))

        # the next run retries the story whose shots failed in the expert (model_error), not
        # the plans (an answer that parses badly is a result; engine.retry_failures=all redoes it)
        requests = len(server.requests)
        run(tmp_path, *args, *gpt_args(server), env=env)
        assert len(server.requests) == requests
    again = calls(job)
    assert again["planner/gpt"]["calls"] == 0 and again["planner/gpt"]["cache_hits"] == 9
    assert again["image/sequential"]["calls"] == 1 and again["image/sequential"]["cache_hits"] == 1


# -- the planner forms, directly -------------------------------------------------------------------


def test_page_planners_are_refused_and_chat_planners_take_the_shot_form() -> None:
    registry = load_plugins()
    with pytest.raises(ConfigError, match="planner=copy reads .*current_text"):
        shot_planner_class(registry.component("planner", "copy"))
    gpt = shot_planner_class(registry.component("planner", "gpt"))
    assert gpt.name == "gpt" and gpt.reads == ("shot_prompt", "shot", "current_image")
    planner = gpt(seed=0)
    assert planner.output_params()["prompt_sha256"] == PROMPT_DIGEST
    with pytest.raises(ConfigError, match="planner.prompt=official"):
        gpt(seed=0, prompt="official")
    template = shot_planner_class(registry.component("planner", "template"))
    assert template.name == "template" and template.reads == ("shot_prompt",)


def test_the_claude_form_sends_the_same_shot_request() -> None:
    # another wire format: Claude sends the same request as its system text and content blocks
    pytest.importorskip("anthropic", reason="the claude planner's schema needs its SDK")
    registry = load_plugins()
    if "claude" not in registry.names("planner"):
        pytest.skip("omnistory-anthropic is not installed")
    claude = shot_planner_class(registry.component("planner", "claude"))(seed=0)
    item = {"shot_prompt": "merged", "shot": {"plot": "Pip waves."}, "current_image": None}
    kwargs = claude.request_kwargs(claude.build_request(item))
    assert kwargs["system"] == SYSTEM_PROMPT
    [message] = kwargs["messages"]
    assert [block["type"] for block in message["content"]] == ["image", "text"]
    assert "Plot: Pip waves." in message["content"][1]["text"]


def test_the_shot_text_carries_every_field_and_dataset_braces_are_safe() -> None:
    shot = {
        "story_id": "01",
        "index": 4,
        "camera": "Wide {shot}",
        "plot": "Pip waves.",
        "script": "Pip stands.",
        "scene": "A deck.",
        "character_names": ["Pip"],
        "story_type": "Picture book",
    }
    item = {"shot_prompt": "merged {0}", "shot": shot, "current_image": media(Path("x.png"))}
    text = render_shot_text(item)
    for line in ("Camera: Wide {shot}", "Plot: Pip waves.", "Setting: A deck.", "merged {0}"):
        assert line in text
    assert "reference image of Pip" in text and "Shot 4 of story 01" in text
    assert "blank" in render_shot_text({**item, "current_image": None})


def test_a_plan_gives_its_image_prompt_or_its_failure() -> None:
    def record(text: str) -> CallRecord:
        return CallRecord(key="k", component="planner/x", status="ok", output={"text": text})

    plan = {"narration": "n", "image_prompt": "a deck", "speech": {"speaker": "A"}}
    failure = plan_image_prompt(record(json.dumps(plan)))
    assert not isinstance(failure, str) and failure.category == "plan_missing_field"
    plan["speech"] = {
        "speaker": "A",
        "utterance": "Hi.",
        "emotion": "happy",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    }
    assert plan_image_prompt(record(json.dumps(plan))) == "a deck"
    assert plan_image_prompt(record("no json")).category == "plan_json_error"


def test_the_wrappers_need_an_inner_editor_and_key_its_parameters() -> None:
    from omnistory_vistorybench.systems import FirstReferenceImage, SequentialImage

    with pytest.raises(ConfigError, match="image.inner=dev reads .*must read current_image"):
        SequentialImage(inner="dev", seed=0)
    with pytest.raises(ConfigError, match="image.inner=nothing is not an installed image"):
        FirstReferenceImage(inner="nothing", seed=0)
    with pytest.raises(ConfigError, match="image.inner=sequential must be a per-shot"):
        FirstReferenceImage(inner="sequential", seed=0)
    with pytest.raises(ConfigError, match="canvas_width must be an integer >= 16"):
        FirstReferenceImage(canvas_width=8, seed=0)
    # the inner's parameters are checked by the inner and are part of the key
    with pytest.raises(ConfigError, match="steps"):
        FirstReferenceImage(steps=0, seed=0)
    small, large = FirstReferenceImage(steps=2, seed=0), FirstReferenceImage(steps=3, seed=0)
    assert small.output_params()["steps"] == 2
    assert small.output_params() != large.output_params()
    assert small.canvas_size == (1024, 1024)  # the inner's default output size
    assert FirstReferenceImage(width=64, height=32, seed=0).canvas_size == (64, 32)


def test_first_ref_keeps_the_component_contract(tiny_kontext: Path) -> None:
    from omnistory_testkit import check_component
    from omnistory_vistorybench.systems import FirstReferenceImage

    # on the Omni-StoryBench demo pages (a page is a current_image like a reference)
    report = check_component(
        FirstReferenceImage, model=str(tiny_kontext), auto_resize=False, canvas_width=32, **TINY
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    varied = next(p for p in report.passed if p.startswith("output_params ("))
    assert "steps" in varied and "canvas_width" in varied, varied
