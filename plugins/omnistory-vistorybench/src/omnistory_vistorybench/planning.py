"""The planner stage of a ViStoryBench job: a planner writes each shot's image prompt.

Omni-StoryBench's planners read a book page (``current_text``, ``metadata``, ``conditions``) and
answer a plan (Plan JSON: ``narration``, ``image_prompt``, ``speech``) whose ``image_prompt`` the
image expert draws.  ViStoryBench gives a shot script instead, so a planner runs here in its
*ViStoryBench form*: the same registered planner (name, version, parameters, client, retries,
usage, structured output), reading the shot (:data:`SHOT_READS`) instead of a page, and still
answering a Plan JSON, of which the job keeps ``image_prompt`` (:func:`plan_image_prompt`).
Keeping the Plan schema is deliberate: it is the one schema every chat planner already sends as
structured output (OpenAI ``response_format``, Claude's ``output_config`` or tool, vLLM's guided
decoding), so no planner needs a task-specific request shape.

The forms (:func:`shot_planner_class`):

* ``template`` (built in): the official prompt merge.  The image prompt is the shot's
  ``shot_prompt`` (``dataset.story_prompt_merge``) verbatim, so ``planner=template`` draws exactly
  what a run without a planner draws, through a planner stage.
* the chat planners (every :class:`~omnistory_core.kit.planning.VLMPlanner`: ``gpt``, ``claude``,
  ``glm``, ``internvl``, ``qwen35``, a plugin's own): the request is :func:`shot_request`, the
  shot's fields and the first onstage reference image, asking for a self-contained, FLUX-sized
  image prompt.  ``planner.prompt`` names an Omni-StoryBench wording and must stay ``default``;
  the ViStoryBench wording's digest replaces it in the cache key (``prompt_sha256``).
* a planner whose ``reads`` are all ViStoryBench inputs runs as it is.

Any other planner (``copy``, ``oracle``, ``noop``: they read a page) is refused in one line.

Why the forms subclass the registered class rather than wrap an instance: the engine names a
component, keys its calls and finds its plugin by ``kind``/``name``/``version`` and
``output_params`` on the class; a subclass keeps all of them, and overrides only what reads the
task's inputs (``reads``, ``build_request``, ``run_one``).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any, ClassVar

from omnistory_core.api import (
    LABELS,
    Component,
    ConfigError,
    Failure,
    Media,
    PlannerResponse,
    parse_plan,
)
from omnistory_core.kit.jobs import CallRecord
from omnistory_core.kit.planning import (
    EncodedImage,
    PlannerConfigError,
    PlannerRequest,
    VLMPlanner,
    encode_image,
)
from omnistory_vistorybench.declared import INPUTS

#: what a chat planner reads about a shot: the merged prompt (every text field, with each onstage
#: character's description), the structured fields, and the first onstage reference image
SHOT_READS: tuple[str, ...] = ("shot_prompt", "shot", "current_image")
#: what the template form reads: the official merged prompt alone
MERGE_READS: tuple[str, ...] = ("shot_prompt",)
#: the speech a ViStoryBench plan carries: the Plan schema requires one, no stage speaks it
SILENT_SPEECH: dict[str, str] = {
    "speaker": "Narrator",
    "utterance": "...",
    "emotion": "neutral",
    "speed": "normal",
    "pitch": "normal",
    "gender": "female",
}
#: the side of the blank image sent when no onstage character has a reference (every planner
#: request carries exactly one image)
BLANK_SIDE = 64

SYSTEM_PROMPT = (
    "You write image prompts for the shots of an illustrated story. For each shot you are "
    "given its storyboard entry (camera, plot, static description, setting, the characters on "
    "stage with their descriptions) and the reference image of the first character on stage. "
    "A text-to-image model draws the shot from your image prompt alone: it sees neither the "
    "storyboard nor the reference image."
)

IMAGE_RULE = (
    "one self-contained paragraph of at most 120 words for a text-to-image model: the camera "
    "framing, the setting, every character on stage with the appearance their description and "
    "reference image give them, what each is doing, their expressions, and the lighting and "
    "style the story type suggests. Name nothing the model cannot see (no 'same as before', no "
    "story events outside this shot). No text, letters or speech bubbles in the picture."
)


def _labels_text() -> str:
    return "\n".join(f'  - "{name}": one of {", ".join(values)}' for name, values in LABELS.items())


def render_shot_text(item: Mapping[str, Any]) -> str:
    """The user text of one shot's request.  ``item`` holds :data:`SHOT_READS`; the image
    travels as its own message part.  Never ``str.format`` on dataset text (braces are safe)."""
    shot = dict(item.get("shot") or {})
    names = [str(n) for n in shot.get("character_names") or []]
    image_note = (
        f"The attached image is the reference image of {names[0]}."
        if item.get("current_image") is not None and names
        else "The attached image is blank: no character on stage has a reference image."
    )
    return (
        f"Story type: {shot.get('story_type', '')}\n"
        f"Shot {shot.get('index', '')} of story {shot.get('story_id', '')}\n\n"
        f"Camera: {shot.get('camera', '')}\n"
        f"Plot: {shot.get('plot', '')}\n"
        f"Static description: {shot.get('script', '')}\n"
        f"Setting: {shot.get('scene', '')}\n"
        f"Characters on stage: {', '.join(names) if names else 'none'}\n\n"
        "The benchmark's merged prompt of the shot (the fields above, with each character's "
        "description):\n"
        f"{item.get('shot_prompt') or ''}\n\n"
        f"{image_note}\n\n"
        "Answer with one JSON object and nothing else, with exactly these fields:\n"
        f'- "image_prompt": {IMAGE_RULE}\n'
        '- "narration": one short sentence saying what happens in the shot (kept with the '
        "results, never drawn)\n"
        '- "speech": nobody speaks in this task; write the first character on stage (or '
        'Narrator) as "speaker", a short line they might say as "utterance", and the labels:\n'
        f"{_labels_text()}"
    )


#: SHA-256 of the wording the chat form sends besides the shot (part of every cache key)
PROMPT_DIGEST = hashlib.sha256(
    json.dumps([SYSTEM_PROMPT, render_shot_text({})], ensure_ascii=False).encode("utf-8")
).hexdigest()


@lru_cache(maxsize=1)
def blank_image() -> EncodedImage:
    """A white PNG (:data:`BLANK_SIDE` pixels square), the same bytes every time."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (BLANK_SIDE, BLANK_SIDE), (255, 255, 255)).save(buf, format="PNG")
    return EncodedImage(buf.getvalue(), "image/png")


def shot_request(item: Mapping[str, Any], image_max_side: int | None = None) -> PlannerRequest:
    """The request of one shot: :data:`SYSTEM_PROMPT`, :func:`render_shot_text` and the first
    onstage reference (a blank image when there is none: every planner's wire format carries
    exactly one image, and a blank one says nothing)."""
    reference = item.get("current_image")
    image = (
        encode_image(reference, image_max_side) if isinstance(reference, Media) else blank_image()
    )
    return PlannerRequest(system=SYSTEM_PROMPT, text=render_shot_text(item), image=image)


def plan_json(image_prompt: str, narration: str) -> str:
    """A Plan JSON with this image prompt and narration (and :data:`SILENT_SPEECH`)."""
    plan = {"narration": narration, "image_prompt": image_prompt, "speech": SILENT_SPEECH}
    return json.dumps(plan, ensure_ascii=False, sort_keys=True)


class ShotChatForm:
    """The ViStoryBench form of a chat planner (mixed in before its class)."""

    reads: ClassVar[tuple[str, ...]] = SHOT_READS
    params: dict[str, Any]
    name: ClassVar[str]

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if str(self.params.get("prompt", "default")) != "default":
            raise PlannerConfigError(
                f"planner={self.name}: planner.prompt={self.params['prompt']} is an"
                " Omni-StoryBench wording; task vistorybench sends its own shot prompt (drop"
                " planner.prompt)"
            )

    def build_request(self, item: Mapping[str, Any]) -> PlannerRequest:
        return shot_request(item, self.params.get("image_max_side"))

    def output_params(self) -> dict[str, Any]:
        params = dict(super().output_params())  # type: ignore[misc]
        params["prompt_sha256"] = PROMPT_DIGEST
        return params


class MergeTemplateForm:
    """The ViStoryBench form of ``template``: the official prompt merge as the image prompt."""

    reads: ClassVar[tuple[str, ...]] = MERGE_READS

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        merged = str(item["shot_prompt"] or "")
        return PlannerResponse(plan_json(merged, merged))


def _is_builtin_template(cls: type[Component]) -> bool:
    return cls.name == "template" and cls.__module__.startswith("omnistory_core.builtin")


def shot_planner_class(cls: type[Component], planners: str = "") -> type[Component]:
    """The class that runs planner ``cls`` on ViStoryBench shots (see the module docstring);
    ``planners`` names the installed planners for the refusal."""
    if issubclass(cls, VLMPlanner):
        form: type = ShotChatForm
    elif _is_builtin_template(cls):
        form = MergeTemplateForm
    elif all(name in INPUTS for name in cls.reads):
        return cls
    else:
        raise ConfigError(
            f"planner={cls.name} reads {list(cls.reads)}, a book page of Omni-StoryBench, which"
            f" task vistorybench does not provide (its inputs are {', '.join(INPUTS)}); choose"
            " planner=template (the official prompt merge) or a chat planner"
            f" (installed planners: {planners or 'none'})"
        )
    return _with_form(form, cls)


@cache
def _with_form(form: type, cls: type[Component]) -> type[Component]:
    # one class per planner class: the same form every time a job builds it
    name = f"Vistory{cls.__name__}"
    return type(name, (form, cls), {"__module__": __name__, "__qualname__": name})


def build_shot_planner(
    registry: Any, spec: Mapping[str, Any], *, seed: int, allow_oracle: bool
) -> Component:
    """The planner a ``planner`` config names, in its ViStoryBench form, built (parameters
    checked) but not loaded."""
    from omnistory_core.kit.jobs import build_component

    cls = registry.component("planner", str(spec["name"]))
    form = shot_planner_class(cls, ", ".join(registry.names("planner")))
    if form is cls:
        return build_component(registry, "planner", spec, seed=seed, allow_oracle=allow_oracle)
    if cls.oracle and not allow_oracle:  # build_component's rule, for the form built here
        raise ConfigError(f"planner={cls.name} is an oracle component: set allow_oracle=true")
    params = {k: v for k, v in spec.items() if k not in ("name", "runner", "default_choice")}
    params.setdefault("seed", seed)
    return form(**params)


def plan_image_prompt(record: CallRecord | Failure) -> str | Failure:
    """The image prompt of a shot's planner record, or why it has none (the plan's failure:
    ``plan_json_error``, ``plan_missing_field``, ..., or the call's own)."""
    if isinstance(record, Failure):
        return record
    if record.status != "ok":
        return Failure.from_dict(record.failure or {"category": "model_error"})
    parsed = parse_plan(record.output.get("text", ""))
    if parsed.plan is None:
        return parsed.failure or Failure("plan_json_error", "no plan")
    return parsed.plan.image_prompt


def unusable_plan(record: CallRecord) -> bool:
    """An ok planner record whose plan gives no image prompt (recomputed only under
    ``engine.retry_failures=all``: the same request gives the same answer)."""
    return isinstance(plan_image_prompt(record), Failure)


__all__ = [
    "MERGE_READS",
    "PROMPT_DIGEST",
    "SHOT_READS",
    "SYSTEM_PROMPT",
    "MergeTemplateForm",
    "ShotChatForm",
    "build_shot_planner",
    "plan_image_prompt",
    "plan_json",
    "render_shot_text",
    "shot_planner_class",
    "shot_request",
    "unusable_plan",
]
