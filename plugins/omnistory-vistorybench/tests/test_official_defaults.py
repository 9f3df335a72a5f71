"""The official behaviours kept by default, each with its named alternative, in process on the
bundled fixture and small output trees built here:

* single-character action in a ``ch`` run tells the judge the English name (the official
  reloads stories in English); ``faithful=false`` tells it the run's name;
* a story whose folder has images but none at a story.json index is scored 0 by CIDS and by
  prompt alignment (the official story means over no scored shot); ``faithful=false`` leaves it
  out; a story without any image is still skipped (``missing_output``);
* CIDS ``ref_mode=mid-gen`` takes each character's reference from the method's ``chars/``;
* the Inception Score pools every timestamp of a method, mode and language over the split's
  stories (the published tables' recomputation); ``images=run`` scores one run's own folder.

The detector and encoders handed to CIDS here are plain stand-ins (the rules are under test;
the models have their own tests in ``metrics/``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_vistorybench.dataset import fixture_root
from omnistory_vistorybench.evaluation import LITE_RUN_UNIT, UNINDEXED, task_evaluation
from omnistory_vistorybench.metrics import cids
from omnistory_vistorybench.metrics.clip_encoder import Detection, Encoded

FIXTURE = fixture_root()
SENTINEL_JUDGE: Any = object()  # any judge: match_shots then collects the questions to ask


class Halves:
    """Two boxes on every image, its left and right halves."""

    def detect(self, image: Any, prompt: str) -> Detection:
        return Detection([(0.25, 0.5, 0.5, 1.0), (0.75, 0.5, 0.5, 1.0)], [0.9, 0.8])


class MeanColour:
    """Each crop's mean colour, unit norm: every crop is embedded."""

    def encode(self, images: Any) -> Encoded:
        feats = []
        for image in images:
            mean = np.asarray(image.convert("RGB"), float).reshape(-1, 3).mean(axis=0) + 1.0
            feats.append(mean / np.linalg.norm(mean))
        return Encoded(list(range(len(images))), feats)

    def similarity(self, a: Any, b: Any) -> np.ndarray:
        return np.asarray(a) @ np.asarray(b).T


def scorer(**kwargs: Any) -> cids.StoryScorer:
    encoder = MeanColour()
    return cids.StoryScorer(Halves(), lambda tag: encoder, **kwargs)


def evaluation(outputs: Path) -> Any:
    return task_evaluation([], {"outputs": str(outputs), "dataset": {"name": "vistory_fixture"}})


def unit(units: list[Any], run: str, example_id: str) -> Any:
    """The unit of the run ``run``: its method, or ``<method>/<timestamp>`` (a scored run is
    ``<method>/<mode>/<lang>/<timestamp>``)."""

    def named(system: str) -> bool:
        levels = system.split("/")
        return run in (levels[0], f"{levels[0]}/{levels[-1]}")

    (found,) = [u for u in units if named(u.system) and u.example_id == example_id]
    return found


# -- single-character action: the English name -----------------------------------------------------
def test_a_ch_runs_judge_is_told_the_english_name() -> None:
    group = unit(evaluation(FIXTURE / "outputs").scoped("group"), "storyboard", "02")
    characters = group.pool["characters"]
    assert characters["Captain Bo"]["name"] == "波船长"  # the ch run's own name
    assert characters["Captain Bo"]["name_en"] == "Captain Bo"
    asked: dict[bool, set[str]] = {}
    for faithful in (True, False):
        story = scorer(faithful=faithful, action=SENTINEL_JUDGE)
        refs = {k: story.references(k, info) for k, info in characters.items()}
        _, _, _, actions = story.match_shots(group.pool, characters, refs)
        asked[faithful] = {name for shot in actions for _, name, _ in shot.matched}
        # the script is the English one either way (a separate official quirk)
        assert all(shot.script.isascii() for shot in actions)
    assert asked[True] == {"Captain Bo", "Dapple"}
    assert asked[False] == {"波船长", "斑斑"}


# -- images, none at a story.json index ------------------------------------------------------------
@pytest.fixture
def unindexed(tmp_path: Path) -> Path:
    """Story 01's images under indices story.json does not have; story 02 absent."""
    run = tmp_path / "out" / "offbyone" / "base" / "en" / "20250101_000000"
    source = FIXTURE / "outputs" / "copy_paste" / "base" / "en" / "20250101_120000" / "01"
    (run / "01" / "shots").mkdir(parents=True)
    for i, image in enumerate(sorted((source / "shots").glob("*.png"))):
        shutil.copy(image, run / "01" / "shots" / f"shot_{90 + i}.png")
    return tmp_path / "out"


def test_a_story_with_images_at_no_index_scores_zero(unindexed: Path, tmp_path: Path) -> None:
    from omnistory_vistorybench.metrics.prompt_align import RUBRIC_FILES, PromptAlignMetric

    ev = evaluation(unindexed)
    group = unit(ev.scoped("group"), "offbyone", "01")
    assert not group.missing and not any(group.pool["candidate_shots"].values())
    assert group.pool["story_images"]  # the folder's images
    # a story without any image is still skipped, as the official driver skips it
    assert unit(ev.scoped("group"), "offbyone", "02").missing
    shots = [u for u in ev.scoped("item") if u.example_id.startswith("01_")]
    assert shots and all(not u.missing and u.pool["candidate_image"] is None for u in shots)
    assert all(u.pool["shot"][UNINDEXED] for u in shots)
    assert all(u.missing for u in ev.scoped("item") if u.example_id.startswith("02_"))

    # CIDS: every value 0 (the official's), or left out
    characters = group.pool["characters"]
    zero = scorer(faithful=False).score(dict(group.pool, characters=characters))
    assert zero.status == "invalid"
    official = scorer().score(group.pool)
    assert official.status == "ok"
    assert [official.scores[k] for k in cids.CRITERIA[:4]] == [0.0, 0.0, 0.0, 0.0]

    # prompt alignment: each shot 0 without asking the judge, so the story mean is 0
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    for name in RUBRIC_FILES.values():
        (rubrics / name).write_text("rate it 0-4, end with 'Score: N'", encoding="utf-8")
    items = [{"candidate_image": u.pool["candidate_image"], "shot": u.pool["shot"]} for u in shots]
    nowhere = {"rubric_dir": str(rubrics), "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    rows = PromptAlignMetric(**nowhere).run_batch(items)
    assert all(r.status == "ok" and set(r.scores.values()) == {0.0} for r in rows)
    left_out = PromptAlignMetric(**nowhere, faithful=False).run_batch(items)
    assert all(r.status == "invalid" for r in left_out)


# -- ref_mode: mid-gen ----------------------------------------------------------------------------
def test_mid_gen_references_are_the_methods_character_images(tmp_path: Path) -> None:
    group = unit(evaluation(FIXTURE / "outputs").scoped("group"), "copy_paste", "01")
    generated = group.pool["character_images"]
    assert sorted(Path(m.path).name for m in generated) == ["Chelsea.png", "Eileen.png", "Pip.png"]
    story = scorer(ref_mode="mid-gen")
    story.generated = list(generated)
    for key, info in group.pool["characters"].items():
        (ref,) = story.reference_media(key, info)
        assert Path(ref.path).name == f"{key}.png"  # not the dataset's references
    # the official's rule: the file stem (before its first dot) is the key, or holds the name
    story.generated = [
        tmp_path / "chars" / "portrait of Chelsea.v2.png",
        tmp_path / "chars" / "C1.png",
    ]
    info = {"name": "切尔西", "name_en": "Chelsea", "tag": "non_human"}
    assert story.reference_media("Cat", info) == [story.generated[0]]
    assert story.reference_media("C1", info) == [story.generated[0]]  # the first that matches
    with pytest.raises(cids.StoryUnscorable, match="'Dog'"):
        story.reference_media("Dog", {"name": "D", "name_en": "Dog"})
    # scored end to end: every character has its image, so the story scores
    result = scorer(ref_mode="mid-gen", faithful=False).score(group.pool)
    assert result.status == "ok", result.detail
    origin = scorer(faithful=False).score(group.pool)
    assert result.scores["cids_cross_mean"] != origin.scores["cids_cross_mean"]
    # a method without chars/: the story cannot be scored (the official asserts)
    storyboard = unit(evaluation(FIXTURE / "outputs").scoped("group"), "storyboard", "02")
    assert storyboard.pool["character_images"] == []
    assert scorer(ref_mode="mid-gen").score(storyboard.pool).status == "invalid"


# -- the Inception Score over every timestamp ------------------------------------------------------
def test_the_inception_score_pools_every_timestamp_over_the_splits_stories(tmp_path: Path):
    from omnistory_vistorybench.metrics.inception import InceptionScoreMetric
    from PIL import Image

    mode = tmp_path / "out" / "m" / "base" / "en"

    def shot(timestamp: str, story: str, index: int) -> Path:
        path = mode / timestamp / story / "shots" / f"shot_{index:02d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (index * 20, 0, 0)).save(path)
        return path

    old = [shot("20250101_000000", "01", 1), shot("20250101_000000", "01", 2)]
    old_02 = shot("20250101_000000", "02", 1)
    new_01 = shot("20250102_000000", "01", 3)
    new_09 = shot("20250102_000000", "09", 1)  # a story the dataset does not have
    runs = evaluation(tmp_path / "out").scoped("run")
    for system, own in (
        ("m/20250101_000000", [*old, old_02]),
        ("m/20250102_000000", [new_01, new_09]),
    ):
        whole = unit(runs, system, "")
        # the newer story 01 replaces the older one; story 09 is not the dataset's
        assert [Path(m.path) for m in whole.pool["candidate_images"]] == sorted([new_01, old_02])
        # the run's own folder, every story in it (the official bench_run summary)
        assert sorted(Path(m.path) for m in whole.pool["run_images"]) == sorted(own)
        lite = unit(runs, system, LITE_RUN_UNIT)  # 01 is a lite story, 02 is not
        assert [Path(m.path) for m in lite.pool["candidate_images"]] == [new_01]
    # the metric scores the pool by default, the run's folder with images=run
    empty_pool = {"candidate_images": [], "run_images": [object()]}
    assert InceptionScoreMetric().score_run(empty_pool).detail == {"images": 0}
    empty_run = {"candidate_images": [object()], "run_images": []}
    assert InceptionScoreMetric(images="run").score_run(empty_run).detail == {"images": 0}
