"""ViStoryBench as a task: one image per shot of a story, scored on 12 metrics in five ranked
categories.

Plain data (no heavy imports): the records are :class:`~omnistory_vistorybench.dataset.ShotRecord`
(one per shot, ``group`` = the story); a job runs through :func:`omnistory_vistorybench.generate.
generate`, which writes the official method-output layout.  The inputs a generation component may
``reads`` (built per shot by :func:`omnistory_vistorybench.generate.shot_inputs`):

==================  ===========================================================================
``image_prompt``    what the image model draws: the official merged prompt
                    (``dataset.story_prompt_merge``), or the planner's rewrite when the
                    system has a planner (:mod:`omnistory_vistorybench.planning`)
``shot_prompt``     the official merged prompt, always (what the benchmark gives a method)
``current_image``   :class:`~omnistory_core.components.Media` of the first reference image of the
                    first onstage character that has one (the single image slot of a
                    Kontext-style editor); ``None`` when no character with a reference is onstage
``character_refs``  per onstage character, in shot order: ``{key, name, tag, images}`` with every
                    reference image as a ``Media`` (``[]`` when no character is onstage)
``shot``            the shot's text fields: ``story_id, index, plot, scene, camera, script,
                    character_keys, character_names, story_type, language``
``characters``      every character the story defines, in ``story.json`` order, onstage or not:
                    ``{key, name, tag, description, images}`` (``description`` the character's
                    prompt in the loaded language); for methods that read the whole cast
==================  ===========================================================================

ViStoryBench has no gold image, so there are no ``reference_inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_core.api import Aggregation, Column, OutputSlot, PaperTable, Scope, Task, Track

#: the names a generation component of this task may declare in ``reads``
INPUTS: tuple[str, ...] = (
    "image_prompt",
    "shot_prompt",
    "current_image",
    "character_refs",
    "shot",
    "characters",
)

#: track -> its criteria, as the metrics report them (the official story-level keys)
TRACKS: dict[str, tuple[str, ...]] = {
    "character": ("cids_cross_mean", "cids_self_mean", "occm", "copy_paste_score"),
    "style": ("self_csd", "cross_csd"),
    "prompt": ("scene", "camera", "character_action", "single_character_action"),
    "quality": ("aesthetic_score",),
    "diversity": ("inception_score",),
}

#: evaluator -> what one of its scores covers: a shot, a story or the whole run
EVALUATORS: dict[str, Scope] = {
    "cids": "group",
    "csd": "group",
    "prompt_align": "item",
    "aesthetic": "group",
    "diversity": "run",
}

#: the official layout A, which :func:`omnistory_vistorybench.layout.write_shot` writes
LAYOUT = "outputs/<method>/<mode>/<lang>/<YYYYMMDD_HHMMSS>/<story_id>/shots/shot_<NN>.png"


#: one column per metric, grouped by the leaderboard category that ranks it (the official
#: ``summarize_leaderboard.py`` order); OCCM and copy-paste are shown but never ranked
COLUMNS: tuple[Column, ...] = (
    Column("Self Cref Score (Gen-Gen)", "cids", "cids_self_mean", "character"),
    Column("Cross Cref Score (Ref-Gen)", "cids", "cids_cross_mean", "character"),
    Column("Self CSD Score (Gen-Gen)", "csd", "self_csd", "style"),
    Column("Cross CSD Score (Ref-Gen)", "csd", "cross_csd", "style"),
    Column("Camera", "prompt_align", "camera", "prompt"),
    Column("Global Character Action", "prompt_align", "character_action", "prompt"),
    Column("Scene", "prompt_align", "scene", "prompt"),
    # officially written by the CIDS evaluator (one VLM call per matched character crop)
    Column("Local/Single Character Action", "cids", "single_character_action", "prompt"),
    Column("Aesthetics Score", "aesthetic", "aesthetic_score", "quality"),
    Column("Inception Score", "diversity", "inception_score", "diversity"),
    Column("OCCM", "cids", "occm", "character"),
    Column("Copy-Paste Score", "cids", "copy_paste_score", "character", higher_is_better=False),
)

#: the five ranked categories in words (``leaderboard.CATEGORIES`` computes them)
DERIVED: Mapping[str, str] = {
    "Character Consistency(CRef)_rank": "rank of the mean rank of cids_self_mean, cids_cross_mean",
    "Style Consistency(SRef)_rank": "rank of the mean rank of self_csd, cross_csd",
    "Prompt Alignment_rank": (
        "rank of the mean rank of camera, character_action, scene, single_character_action"
    ),
    "Generative Quality_rank": "rank of aesthetic_score",
    "Diversity_rank": "rank of inception_score",
    "overall_rank": "dense rank of the mean of the five category ranks (best mode per method)",
    "prompt_align_avg": (
        "(scene + camera + character_action + 2 * single_character_action) / 5, as officially"
        " when no character_existence metric exists"
    ),
}


def _load(spec: Mapping[str, Any]) -> list[Any]:
    from omnistory_vistorybench.dataset import load_records

    return load_records(spec)


def _generate(cfg: Any, output_dir: Any) -> dict[str, Any]:
    from omnistory_vistorybench.generate import generate

    return generate(cfg, output_dir)


def _evaluation(job_dirs: Any, config: Any) -> Any:
    from omnistory_vistorybench.evaluation import task_evaluation

    return task_evaluation(job_dirs, config)


def _job_name(cfg: Any) -> str:
    from omnistory_vistorybench.runs import job_name

    return job_name(cfg)


def _export(run_dir: Any, out_dir: Any, options: Any = None) -> Any:
    from omnistory_vistorybench.export import export_runs

    return export_runs(run_dir, out_dir, options or {})


def _report(out_dir: Any, **kwargs: Any) -> Any:
    from omnistory_vistorybench.report import build_report

    return build_report(out_dir, **kwargs)


VISTORYBENCH = Task(
    name="vistorybench",
    version="1",
    description=(
        "ViStoryBench: visualize a story shot by shot, one image per shot, consistent with the"
        " characters' reference images"
    ),
    datasets=("vistory", "vistory_fixture"),
    record="omnistory_vistorybench.dataset.ShotRecord",
    inputs=INPUTS,
    reference_inputs=(),
    outputs=(OutputSlot("image", "image"),),
    layout=LAYOUT,
    systems=(
        "image expert per shot",
        "planner -> image expert per shot",
        "story-level image expert (one call per story, each shot conditioned on the previous)",
        "backbone that makes images, each shot given as a page",
    ),
    tracks=tuple(Track(name, criteria) for name, criteria in TRACKS.items()),
    evaluators=EVALUATORS,
    aggregation=Aggregation(
        columns=COLUMNS,
        policies=("valid_only", "zero_filled", "official"),
        derived=DERIVED,
    ),
    tables=(PaperTable("leaderboard", "Rank-based leaderboard (full and lite splits)"),),
    load=_load,
    generate=_generate,
    evaluation=_evaluation,
    report=_report,
    job_name=_job_name,
    export=_export,
)

__all__ = ["COLUMNS", "EVALUATORS", "INPUTS", "LAYOUT", "TRACKS", "VISTORYBENCH"]
