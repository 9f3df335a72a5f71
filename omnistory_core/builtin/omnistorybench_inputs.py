"""What a component may read on Omni-StoryBench (the task's ``input_docs``): the current page, the
book metadata and next-page conditions of the release, the plan fields an expert renders, the
reference answer, and what an evaluator scores.

``metadata`` and ``conditions`` are documented key by key in CONTRIBUTING.md's "What a component
reads" (:mod:`omnistory_core.contract_docs`, from the release schema); here each is one row.
"""

from __future__ import annotations

from omnistory_core.task_inputs import TaskInput

_GENERATION = ("planner", "backbone", "image", "tts")
_EVALUATORS = ("metric", "judge")
_EXAMPLE = (*_GENERATION, *_EVALUATORS)
_EXPERTS = ("image", "tts")
_PLAN = "the plan's `{}` (the Plan schema), or a backbone's plan field"

INPUTS: tuple[TaskInput, ...] = (
    TaskInput(
        "current_image",
        "Media",
        "the current page's illustration x_i (`.open_image()` gives a PIL image)",
        _EXAMPLE,
        "current_image",
    ),
    TaskInput("current_text", "str", "the current page's narration t_i", _EXAMPLE, "current_text"),
    TaskInput(
        "metadata",
        "dict",
        "the book: genre, topic, style, tense, perspective, character sheets (key by key:"
        ' "What a component reads")',
        _EXAMPLE,
        "genre, topic, style, narrative_tense, narrative_perspective, book_characters",
    ),
    TaskInput(
        "conditions",
        "dict",
        "what the next page must show, say and sound like: its characters, scene, text goal,"
        ' ambient sound (key by key: "What a component reads")',
        _EXAMPLE,
        "condition_characters, scene, text_instruction, ambient_sound",
    ),
    TaskInput("narration", "str", _PLAN.format("narration"), _EXPERTS),
    TaskInput("image_prompt", "str", _PLAN.format("image_prompt") + ": what to draw", _EXPERTS),
    TaskInput("utterance", "str", _PLAN.format("speech.utterance") + ": the line", _EXPERTS),
    TaskInput("speaker", "str", _PLAN.format("speech.speaker"), _EXPERTS),
    TaskInput(
        "emotion", "str", _PLAN.format("speech.emotion") + ": angry|happy|neutral|sad", _EXPERTS
    ),
    TaskInput("speed", "str", _PLAN.format("speech.speed") + ": slow|normal|fast", _EXPERTS),
    TaskInput("pitch", "str", _PLAN.format("speech.pitch") + ": low|normal|high", _EXPERTS),
    TaskInput("gender", "str", _PLAN.format("speech.gender") + ": female|male", _EXPERTS),
    TaskInput(
        "reference_text", "str", "the gold next narration", _EXAMPLE, "next_text", oracle=True
    ),
    TaskInput(
        "reference_image",
        "Media",
        "the gold next illustration",
        _EXAMPLE,
        "next_image",
        oracle=True,
    ),
    TaskInput(
        "reference_speech",
        "dict",
        "the target speech: utterance, speaker, emotion, speed, pitch, gender",
        _EXAMPLE,
        "speech_utterance, speech_speaker, speech_emotion, speech_speed, speech_pitch,"
        " speech_gender",
        oracle=True,
    ),
    TaskInput(
        "candidate_text", "str", "the system's narration (text/<i>/generated.txt)", _EVALUATORS
    ),
    TaskInput(
        "candidate_image",
        "Media",
        "the system's illustration (image/<i>/generated.png)",
        _EVALUATORS,
    ),
    TaskInput(
        "candidate_speech",
        "Media",
        "the system's speech (speech/<i>/generated.wav)",
        _EVALUATORS,
    ),
    TaskInput(
        "candidate_plan",
        "dict",
        "the system's parsed plan (plans.jsonl), when it had one",
        _EVALUATORS,
    ),
)

__all__ = ["INPUTS"]
