"""A ViStoryBench job through the real command line: the official layout, its records, stats and
manifest, re-runs from the store, Kontext-style experts, the tasks command and the refusals.

``omnistory_testkit.check_component`` is not used for :class:`CopyPasteImage`: it runs a
component on the Omni-StoryBench demo and holds ``reads`` to that task's inputs, so an expert
reading ``character_refs`` fails its ``reads`` check; the expert is tested directly instead.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_testkit import run_cli
from omnistory_vistorybench.dataset import (
    dataset_fingerprint,
    fixture_root,
    load_stories,
    shot_records,
)
from omnistory_vistorybench.experts import BACKGROUND, CopyPasteImage, stitch
from omnistory_vistorybench.generate import MediaHasher, RefMedia, shot_inputs
from omnistory_vistorybench.layout import RunKey, read_outputs
from PIL import Image

from omnistory_core.api import Media
from omnistory_core.kit.jobs import item_key

FIXTURE = fixture_root()
#: the story.json indices of the fixture's usable shots (01 shot 6 lacks a field)
FULL = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}
LITE = {"01": FULL["01"]}
QUIET = ("engine.progress=false",)


def job_dir(cwd: Path, system: str, dataset: str = "vistory_fixture") -> Path:
    return cwd / "outputs" / "runs" / dataset / system


def run(cwd: Path, *args: str) -> Any:
    done = run_cli(*args, *QUIET, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_rows(job: Path) -> list[dict[str, Any]]:
    lines = (job / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def calls(job: Path, component: str) -> dict[str, int]:
    return read_json(job / "stats.json")["components"][component]


def the_run(job: Path) -> tuple[RunKey, dict[str, list[int]]]:
    """The one run of a job's outputs tree, and its shot indices per story."""
    runs = read_outputs(job / "outputs")
    assert len(runs) == 1, list(runs)
    [(key, output)] = runs.items()
    return key, {story: sorted(out.shots) for story, out in output.stories.items()}


def pixels(path: Path | Any) -> np.ndarray:
    image = path if isinstance(path, Image.Image) else Image.open(path)
    return np.asarray(image.convert("RGB"))


def test_copy_paste_writes_the_official_layout_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "system=copy_paste")
    job = job_dir(tmp_path, "copy_paste")
    key, shots = the_run(job)
    assert (key.method, key.mode, key.language) == ("copy_paste", "base", "en")
    assert shots == FULL
    run_dir = job / "outputs" / "copy_paste" / "base" / "en" / key.timestamp
    assert sorted(p.name for p in (run_dir / "01" / "shots").iterdir()) == [
        f"shot_{i:02d}.png" for i in FULL["01"]
    ]
    rows = read_rows(job)
    assert [r["id"] for r in rows] == [f"{s}_{i:02d}" for s, ids in FULL.items() for i in ids]
    assert all(r["status"] == "ok" and (job / r["path"]).is_file() for r in rows)
    stats = calls(job, "image/copy_paste")
    # the two shots without a character (one blank canvas) and the two with Eileen alone are
    # one call each: identical inputs
    assert stats["calls"] == 7 and stats["cache_hits"] == 2 and stats["loads"] == 1
    manifest = read_json(job / "manifest.json")
    assert manifest["task"] == {"name": "vistorybench", "version": "1"}
    assert manifest["system_id"] == "copy_paste" and manifest["paradigm"] == "baseline"
    assert manifest["components"]["image"]["name"] == "copy_paste"
    assert manifest["components"]["image"]["version"] == "1"
    assert manifest["components"]["image"]["params"]["size"] == 512
    stories = load_stories(FIXTURE)
    assert manifest["dataset"]["fingerprint"] == dataset_fingerprint(stories)
    assert manifest["dataset"]["root"] == str(FIXTURE)
    assert manifest["layout"]["timestamp"] == key.timestamp
    assert manifest["config"]["task"]["name"] == "vistorybench"
    assert manifest["seed"] == 0
    assert (job / "missing.txt").read_text() == ""

    # the blank shot and the three-character shot are the expert's own images
    assert (pixels(run_dir / "01" / "shots" / "shot_01.png") == BACKGROUND).all()
    story = stories[0]
    refs = [Media(str(story.characters[k].images[0]), "") for k in story.shot(4).character_keys]
    assert np.array_equal(
        pixels(run_dir / "01" / "shots" / "shot_04.png"), pixels(stitch(refs, 512))
    )

    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "system=copy_paste")
    again = calls(job, "image/copy_paste")
    assert again == {"calls": 0, "cache_hits": 9, "failures": 0, "loads": 0}
    assert the_run(job) == (key, shots)  # the same run folder: the timestamp is kept


def test_a_lite_run_with_a_named_mode_lands_beside_the_full_run(tmp_path: Path) -> None:
    base = ("dataset=vistory_fixture", "system=copy_paste", "task.mode=ref")
    run(tmp_path, *base, "task.run_timestamp=20250101_120000")
    full = job_dir(tmp_path, "copy_paste-ref-20250101_120000")
    assert the_run(full) == (RunKey("copy_paste", "ref", "en", "20250101_120000"), FULL)
    before = {p: p.read_bytes() for p in full.rglob("*.png")}
    # the same official run (method, mode, language, timestamp) for another split: refused in
    # one line naming the job that holds it, nothing written
    refused = run_cli(
        *base, "dataset.split=lite", "task.run_timestamp=20250101_120000", *QUIET, cwd=tmp_path
    )
    assert refused.returncode == 2
    assert "is already the run of job directory" in refused.stderr
    assert str(full) in refused.stderr
    lite = job_dir(tmp_path, "copy_paste-ref-lite-20250101_120000")
    assert not lite.exists()
    run(tmp_path, *base, "dataset.split=lite", "task.run_timestamp=20250101_120001")
    lite = job_dir(tmp_path, "copy_paste-ref-lite-20250101_120001")
    assert the_run(lite) == (RunKey("copy_paste", "ref", "en", "20250101_120001"), LITE)
    assert calls(lite, "image/copy_paste")["calls"] == 0  # every shot from the store
    assert read_json(lite / "manifest.json")["dataset"]["split"] == "lite"
    # the full run is untouched
    assert {p: p.read_bytes() for p in full.rglob("*.png")} == before
    assert read_json(full / "manifest.json")["dataset"]["split"] == "full"


def test_kontext_style_experts_get_the_first_onstage_reference(tmp_path: Path) -> None:
    # the built-in copy expert reads current_image, as FLUX.1-Kontext does
    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "image=copy")
    job = job_dir(tmp_path, "copy")
    story = load_stories(FIXTURE)[0]
    rows = {r["id"]: r for r in read_rows(job)}
    for shot in story.shots:
        row = rows[shot.id]
        if not shot.character_keys:  # current_image is None: that shot fails, as data
            assert row["status"] == "failure" and row["category"] == "model_error"
            assert "path" not in row
            continue
        first = story.characters[shot.character_keys[0]].images[0]
        assert row["status"] == "ok"
        assert np.array_equal(pixels(job / row["path"]), pixels(first))
    _, shots = the_run(job)
    assert shots == {"01": [2, 3, 4, 5, 7], "02": [1, 2]}
    missing = (job / "missing.txt").read_text().splitlines()
    assert [line.split("\t")[:3] for line in missing] == [
        ["01_01", "image", "model_error"],
        ["02_03", "image", "model_error"],
    ]
    assert read_json(job / "stats.json")["missing"] == {"image": {"model_error": 2}}


def test_an_expert_shared_by_two_systems_is_called_once_per_input(tmp_path: Path) -> None:
    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "image=noop")
    first = job_dir(tmp_path, "noop")
    assert calls(first, "image/noop")["calls"] == 9  # the merged prompts all differ
    _, shots = the_run(first)
    assert shots == FULL
    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "image=noop", "system_id=other")
    second = job_dir(tmp_path, "other")
    assert calls(second, "image/noop") == {"calls": 0, "cache_hits": 9, "failures": 0, "loads": 0}
    key, _ = the_run(second)
    assert key.method == "other"


def test_the_tasks_command_lists_vistorybench(tmp_path: Path) -> None:
    table = run_cli("tasks", "--json", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    [task] = [t for t in json.loads(table.stdout) if t["name"] == "vistorybench"]
    assert task["outputs"] == {"image": "image"}
    assert task["tracks"]["character"][:2] == ["cids_cross_mean", "cids_self_mean"]
    assert task["evaluators"]["diversity"] == "run"
    assert {"image_prompt", "current_image", "character_refs", "shot"} <= set(task["inputs"])


def test_a_malformed_story_json_stops_the_job_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "ViStory", data / "ViStory")
    broken = data / "ViStory" / "02" / "story.json"
    broken.write_bytes(broken.read_bytes()[:200])
    done = run_cli("system=copy_paste", "dataset=vistory", f"dataset.root={data}", cwd=tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("omnistory: error")]
    assert len(errors) == 1 and str(broken) in errors[0] and "invalid JSON" in errors[0]
    assert "Traceback" not in done.stderr
    job = job_dir(tmp_path, "copy_paste", "vistory")
    written = {p.name for p in job.iterdir()} if job.exists() else set()
    assert written <= {".hydra", "omnistory.log"}  # Hydra's own files only
    assert not (tmp_path / "outputs" / "store").exists()


@pytest.mark.parametrize(
    ("args", "message", "instead"),
    [
        # a planner that reads a book page (current_text) has no ViStoryBench form
        (("image=noop", "planner=copy"), "planner=copy reads", "planner=template"),
        (("image=noop", "tts=espeak"), "tts=espeak is not supported", "copy_paste"),
        ((), "needs an image expert: choose image=NAME", "copy_paste"),
    ],
)
def test_an_unsupported_system_is_refused(
    tmp_path: Path, args: tuple[str, ...], message: str, instead: str
) -> None:
    done = run_cli("task=vistorybench", "dataset=vistory_fixture", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and instead in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "outputs" / "store").exists()


# -- the inputs and the Copy-Paste expert, directly ------------------------------------------


def fixture_inputs(root: Path) -> dict[str, dict[str, Any]]:
    stories = {s.id: s for s in load_stories(root)}
    media = MediaHasher()
    return {r.id: shot_inputs(r, stories[r.group], media) for r in shot_records(stories.values())}


def test_shot_inputs_give_the_onstage_characters() -> None:
    inputs = fixture_inputs(FIXTURE)
    assert inputs["01_01"]["current_image"] is None and inputs["01_01"]["character_refs"] == []
    four = inputs["01_04"]
    assert [c["key"] for c in four["character_refs"]] == ["Eileen", "Chelsea", "Pip"]
    assert [len(c["images"]) for c in four["character_refs"]] == [2, 1, 1]
    assert four["current_image"].path.endswith("01/image/Eileen/00.jpg")
    assert four["image_prompt"] == four["shot_prompt"]
    assert four["shot"]["index"] == 4 and four["shot"]["story_id"] == "01"
    # an undefined character is not onstage
    assert [c["key"] for c in inputs["01_07"]["character_refs"]] == ["Eileen"]


def test_call_keys_do_not_depend_on_where_the_dataset_lies(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / "ViStory", tmp_path / "ViStory")
    expert = CopyPasteImage()
    here, there = fixture_inputs(FIXTURE), fixture_inputs(tmp_path)
    assert isinstance(here["01_04"]["character_refs"][0]["images"][0], RefMedia)
    for shot, inputs in here.items():
        pool = {"character_refs": inputs["character_refs"]}
        moved = {"character_refs": there[shot]["character_refs"]}
        assert item_key(expert, pool) == item_key(expert, moved)


def test_copy_paste_stitches_side_by_side_deterministically(tmp_path: Path) -> None:
    red, blue = tmp_path / "red.png", tmp_path / "blue.png"
    Image.new("RGB", (20, 40), (255, 0, 0)).save(red)
    Image.new("RGB", (40, 20), (0, 0, 255)).save(blue)
    refs = [
        {"key": "a", "name": "A", "tag": "non_human", "images": [Media(str(red), "r")]},
        {"key": "b", "name": "B", "tag": "non_human", "images": [Media(str(blue), "b")]},
        {"key": "c", "name": "C", "tag": "non_human", "images": []},  # no reference: left out
    ]
    expert = CopyPasteImage(size=64)
    image = pixels(expert.run_one({"character_refs": refs}))
    assert image.shape == (64, 64, 3)
    # red: 20x40 fitted into a 32x64 column is 32x64 filling it
    assert (image[:, :32] == (255, 0, 0)).all()
    # blue: 40x20 fitted into 32 wide is 32x16, centred vertically
    assert (image[24:40, 32:] == (0, 0, 255)).all()
    assert (image[:24, 32:] == BACKGROUND).all() and (image[40:, 32:] == BACKGROUND).all()
    assert np.array_equal(image, pixels(expert.run_one({"character_refs": refs})))
    blank = pixels(CopyPasteImage().run_one({"character_refs": []}))
    assert blank.shape == (512, 512, 3) and (blank == BACKGROUND).all()


def test_copy_paste_declares_its_parameters() -> None:
    from omnistory_core.api import ParamError

    assert CopyPasteImage.reads == ("character_refs",)
    assert CopyPasteImage().output_params()["size"] == 512
    with pytest.raises(ParamError, match="size"):
        CopyPasteImage(size=4)
    with pytest.raises(ParamError, match="unknown parameter"):
        CopyPasteImage(width=64)


def test_an_image_expert_is_told_which_shot_it_draws(tmp_path: Path) -> None:
    """current_example() names the shot's record id (logging only: not part of the key)."""
    from omnistory_vistorybench.dataset import fixture_root
    from omnistory_vistorybench.generate import ShotSystem, load_dataset, run_image_stage

    from omnistory_core.api import ImageExpert, current_example
    from omnistory_core.kit.jobs import Store

    seen: list[str | None] = []

    class Probe(ImageExpert):
        name = "probe"
        version = "1"
        reads = ("shot_prompt",)
        parameters = ()

        def run_one(self, item: dict[str, Any]) -> Any:
            seen.append(current_example())
            return Image.new("RGB", (8, 8))

    data = load_dataset({"name": "vistory", "root": str(fixture_root())})
    system = ShotSystem("probe", {"name": "probe"})
    run_image_stage(Probe(), system, data, Store(tmp_path / "store"), {})
    assert seen == [r.id for r in data.records]


def test_a_sweep_validates_the_dataset_without_a_callback_error(tmp_path: Path) -> None:
    """The sweep's start checks the ViStory records like any dataset's (no Omni-only fields)."""
    done = run(tmp_path, "-m", "task=vistorybench", "system=copy_paste", "dataset=vistory_fixture")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "raised" not in done.stderr, done.stderr[-3000:]


def test_a_parameter_of_a_group_the_job_does_not_build_is_refused(tmp_path: Path) -> None:
    """The story-continuation default TTS steps aside here, so its parameter would be dropped."""
    done = run_cli(
        "task=vistorybench",
        "system=copy_paste",
        "dataset=vistory_fixture",
        "tts.volume=50",
        *QUIET,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "tts.volume=50" in done.stderr and "has no tts" in done.stderr
    job = job_dir(tmp_path, "copy_paste")  # Hydra's own .hydra/ only: no image, no manifest
    assert not (job / "manifest.json").exists() and not (job / "outputs").exists()
