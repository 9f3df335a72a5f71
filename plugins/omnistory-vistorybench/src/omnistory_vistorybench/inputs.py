"""What a component may read on ViStoryBench (the task's ``input_docs``), key by key, with the
official ``story.json`` field each value comes from.

The generation inputs are built per shot by :func:`omnistory_vistorybench.shots.shot_inputs`
(a backbone also gets the shot as a page: :func:`omnistory_vistorybench.backbones.page_view`);
the evaluation inputs per item (shot), group (story) and run by
:mod:`omnistory_vistorybench.evaluation`.  ``python -m omnistory_core tasks --inputs
vistorybench`` prints this table, and CONTRIBUTING.md holds it.
"""

from __future__ import annotations

from omnistory_core.api import TaskInput

_SHOT_READERS = ("planner", "image", "backbone")
_EVALUATORS = ("metric", "judge")
_LANGUAGE = "in the loaded language (`dataset.language`: en or ch)"


def _character_keys(*, description: bool) -> tuple[TaskInput, ...]:
    keys = [
        TaskInput(
            "key",
            "str",
            "the character's key: the English name shots list, and its reference folder",
            source="Characters.<key>",
        ),
        TaskInput("name", "str", f"the character's name {_LANGUAGE}", source="name_en / name_ch"),
        TaskInput(
            "tag",
            "str",
            "realistic_human | unrealistic_human | non_human (CIDS embeds realistic humans' faces)",
            source="tag",
        ),
    ]
    if description:
        keys.append(
            TaskInput(
                "description",
                "str",
                f"how the character looks, {_LANGUAGE}",
                source="prompt_en / prompt_ch",
            )
        )
    keys.append(
        TaskInput(
            "images",
            "list[Media]",
            "every reference image of the character, sorted by file name",
            source="image/<key>/*.png|jpg|jpeg",
        )
    )
    return tuple(keys)


#: the shot's text fields, as a generation component gets them (the loader's names)
SHOT_KEYS: tuple[TaskInput, ...] = (
    TaskInput("story_id", "str", "the story (its folder name, `01`)", source="ViStory/<NN>"),
    TaskInput("index", "int", "the shot's number in the story (1-based)", source="Shots[].index"),
    TaskInput(
        "plot", "str", f"what happens in the shot, {_LANGUAGE}", source="Plot Correspondence"
    ),
    TaskInput("scene", "str", f"the setting, {_LANGUAGE}", source="Setting Description"),
    TaskInput(
        "camera", "str", f"the shot's framing, {_LANGUAGE}", source="Shot Perspective Design"
    ),
    TaskInput(
        "script",
        "str",
        f"what the picture shows, {_LANGUAGE}",
        source="Static Shot Description",
    ),
    TaskInput(
        "character_keys",
        "list[str]",
        "the onstage characters' keys, in the shot's order",
        source="Characters Appearing (en)",
    ),
    TaskInput(
        "character_names",
        "list[str]",
        f"the onstage characters' names {_LANGUAGE}, aligned with character_keys",
        source="Characters Appearing",
    ),
    TaskInput("story_type", "str", f"the story's type {_LANGUAGE}", source="Story_type"),
    TaskInput("language", "str", "the loaded language: en | ch", source="dataset.language"),
)

#: a shot as a metric or judge gets it: texts in English and in the run's language
EVAL_SHOT_KEYS: tuple[TaskInput, ...] = (
    SHOT_KEYS[0],
    SHOT_KEYS[1],
    TaskInput(
        "character_key",
        "list[str]",
        "the onstage characters' keys, then any key the shot lists that the story does not"
        " define (OCCM counts it)",
        source="Characters Appearing (en)",
    ),
    SHOT_KEYS[7],
    *(
        TaskInput(
            k.name,
            "dict[str, str]",
            f"{k.doc.split(',')[0]}, by language: {{run language: text, 'en': text}} (the"
            " official scores against English)",
            source=k.source,
        )
        for k in SHOT_KEYS[2:6]
    ),
)

INPUTS: tuple[TaskInput, ...] = (
    TaskInput(
        "image_prompt",
        "str",
        "what to draw: the official merged prompt (= shot_prompt), or, in a system with a"
        " planner, the image prompt of its plan",
        ("image", "backbone"),
        "story_prompt_merge / the plan's image_prompt",
    ),
    TaskInput(
        "shot_prompt",
        "str",
        "THE OFFICIAL MERGED PROMPT, always: camera;plot;script;<name> is <description> per"
        " onstage character;scene; (what the benchmark gives a method)",
        _SHOT_READERS,
        "dataset_load.story_prompt_merge",
    ),
    TaskInput(
        "current_image",
        "Media | None",
        "the first reference image of the first onstage character that has one (the one image"
        " slot of an editing model); None when no onstage character has one (a backbone: a"
        " blank white 1024 px canvas)",
        _SHOT_READERS,
        "story_prompt_merge's images[0]",
    ),
    TaskInput(
        "character_refs",
        "list[dict]",
        "the onstage characters, in the shot's order ([] when none is onstage)",
        _SHOT_READERS,
        "Characters Appearing + Characters",
        keys=_character_keys(description=False),
    ),
    TaskInput(
        "shot",
        "dict",
        "the shot's fields, under the loader's names",
        _SHOT_READERS,
        "Shots[i]",
        keys=SHOT_KEYS,
    ),
    TaskInput(
        "characters",
        "list[dict]",
        "every character the story defines, onstage or not, in story.json order (for methods"
        " that read the whole cast)",
        _SHOT_READERS,
        "Characters",
        keys=_character_keys(description=True),
    ),
    TaskInput(
        "current_text",
        "str",
        "the shot as a page's narration: the merged prompt",
        ("backbone",),
        "story_prompt_merge",
    ),
    TaskInput(
        "metadata",
        "dict",
        "the shot as a book: genre and style = the story type, characters = [{name}] onstage",
        ("backbone",),
        "Story_type, Characters Appearing",
    ),
    TaskInput(
        "conditions",
        "dict",
        "the shot as the next page: characters = [{name, visibility}] onstage, scene, and"
        " text_instruction = the merged prompt",
        ("backbone",),
        "Setting Description, story_prompt_merge",
    ),
    TaskInput(
        "candidate_image",
        "Media | None",
        "the shot's generated image (None: a story with images none of which is at a shot"
        " index; the official scores it 0)",
        _EVALUATORS,
        "outputs/.../<story>/shots/shot_<NN>.png",
    ),
    TaskInput(
        "shot",
        "dict",
        "the shot's fields, each text in English and the run's language",
        _EVALUATORS,
        "Shots[i]",
        keys=EVAL_SHOT_KEYS,
    ),
    TaskInput(
        "candidate_shots",
        "dict[int, Media | None]",
        "the story's images by shot index (None: that shot has none)",
        _EVALUATORS,
        "outputs/.../<story>/shots/",
        scope="group",
    ),
    TaskInput(
        "story_images",
        "list[Media]",
        "every image of the story's output folder",
        _EVALUATORS,
        "outputs/.../<story>/",
        scope="group",
    ),
    TaskInput(
        "character_images",
        "list[Media]",
        "the method's own character images (CIDS's references with ref_mode=mid-gen)",
        _EVALUATORS,
        "outputs/.../<story>/chars/",
        scope="group",
    ),
    TaskInput(
        "characters",
        "dict[str, dict]",
        "the story's characters by key: {name, name_en, tag, refs: [Media]}",
        _EVALUATORS,
        "Characters",
        scope="group",
    ),
    TaskInput(
        "shots",
        "list[dict]",
        "every shot of the story, each as the item scope's `shot`",
        _EVALUATORS,
        "Shots",
        scope="group",
    ),
    TaskInput(
        "candidate_images",
        "list[Media]",
        "the split's shot images, every timestamp of the method, mode and language pooled (the"
        " official Inception Score recomputation)",
        _EVALUATORS,
        "outputs/<method>/<mode>/<lang>/*/",
        scope="run",
    ),
    TaskInput(
        "run_images",
        "list[Media]",
        "this run's own shot images (what bench_run.py scores)",
        _EVALUATORS,
        "outputs/<method>/<mode>/<lang>/<timestamp>/",
        scope="run",
    ),
)

__all__ = ["EVAL_SHOT_KEYS", "INPUTS", "SHOT_KEYS"]
