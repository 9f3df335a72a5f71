"""Offline planners: ``template``, ``copy``, ``oracle`` (metric validation only), ``noop``."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from omnistory_core.components import Planner, PlannerResponse
from omnistory_core.params import Param

#: free-text emotion keywords -> benchmark emotion label (first match wins, in this order)
EMOTION_LEXICON: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "angry",
        (
            "angry",
            "anger",
            "annoyed",
            "furious",
            "frustrat",
            "irritat",
            "mad",
            "cross",
            "grumpy",
            "indignant",
            "outraged",
            "rage",
        ),
    ),
    (
        "sad",
        (
            "sad",
            "unhappy",
            "lonely",
            "tearful",
            "crying",
            "disappoint",
            "gloomy",
            "heartbroken",
            "sorrow",
            "miserable",
            "upset",
            "homesick",
            "regret",
        ),
    ),
    (
        "happy",
        (
            "happy",
            "joy",
            "excite",
            "delight",
            "cheerful",
            "glad",
            "proud",
            "amused",
            "thrill",
            "grateful",
            "thankful",
            "playful",
            "relieved",
            "content",
            "smil",
            "laugh",
            "eager",
        ),
    ),
)
FAST_WORDS = (
    "excite",
    "hurr",
    "rush",
    "panic",
    "scared",
    "afraid",
    "frighten",
    "angry",
    "furious",
    "eager",
    "thrill",
    "urgent",
    "alarm",
)
SLOW_WORDS = (
    "sad",
    "tired",
    "sleepy",
    "calm",
    "gentle",
    "thoughtful",
    "lonely",
    "weary",
    "slow",
    "sorrow",
    "shy",
    "hesitant",
)
YOUNG_WORDS = (
    "child",
    "kid",
    "young",
    "little",
    "baby",
    "girl",
    "boy",
    "cub",
    "chick",
    "puppy",
    "kitten",
)
OLD_WORDS = ("old", "elder", "grand", "aged", "ancient")


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(w in text for w in words)


def emotion_label(free_text: str) -> str:
    """Map a free-text emotion ("a little nervous but excited") to angry/happy/neutral/sad."""
    text = (free_text or "").lower()
    for label, words in EMOTION_LEXICON:
        if _has(text, words):
            return label
    return "neutral"


def speed_label(free_text: str) -> str:
    text = (free_text or "").lower()
    if _has(text, FAST_WORDS):
        return "fast"
    if _has(text, SLOW_WORDS):
        return "slow"
    return "normal"


def _age(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", str(value or ""))]
    return sum(numbers) / len(numbers) if numbers else None


def pitch_label(character: dict[str, Any]) -> str:
    age = _age(character.get("age_range"))
    words = " ".join(str(character.get(k, "")) for k in ("age_range", "role", "species")).lower()
    if (age is not None and age <= 12) or _has(words, YOUNG_WORDS):
        return "high"
    if (age is not None and age >= 60) or _has(words, OLD_WORDS):
        return "low"
    return "normal"


def _sentence(text: str | None) -> str:
    text = " ".join(str(text or "").split()).strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _plan_json(narration: str, image_prompt: str, speech: dict[str, str]) -> str:
    plan = {"narration": narration, "image_prompt": image_prompt, "speech": speech}
    return json.dumps(plan, ensure_ascii=False, sort_keys=True)


class TemplatePlanner(Planner):
    """A deterministic plan from the next-page conditions and book metadata.

    The speaker is the first condition character with a speech intent (else the first visible one);
    the utterance is that intent; labels come from keyword lexicons over the character's free-text
    emotion (emotion, speed) and the book's character sheet (gender, age -> pitch).  A floor for
    what a planner must beat, and a fully offline way to exercise every downstream stage.
    """

    name = "template"
    baseline = True
    version = "1"
    reads = ("metadata", "conditions")
    description = "deterministic plan from conditions + metadata (keyword lexicon for labels)"
    parameters = ()

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        from omnistory_core.kit.voices import resolve_gender

        metadata, conditions = item["metadata"] or {}, item["conditions"] or {}
        characters = [c for c in conditions.get("characters") or [] if isinstance(c, dict)]
        speaking = [c for c in characters if str(c.get("speech_intent") or "").strip()]
        visible = [c for c in characters if "not" not in str(c.get("visibility", "")).lower()]
        chosen = (speaking or visible or characters or [{"name": "Narrator"}])[0]
        speaker = str(chosen.get("name") or "Narrator")
        sheet = next(
            (
                c
                for c in metadata.get("characters") or []
                if isinstance(c, dict) and str(c.get("name", "")).lower() == speaker.lower()
            ),
            {},
        )
        feeling = str(chosen.get("emotion") or "")
        utterance = _sentence(chosen.get("speech_intent") or chosen.get("action") or "") or "Look!"
        sex = str(sheet.get("sex") or "").lower()
        speech = {
            "speaker": speaker,
            "utterance": utterance,
            "emotion": emotion_label(feeling),
            "speed": speed_label(feeling),
            "pitch": pitch_label(sheet),
            "gender": resolve_gender(sex if sex in ("female", "male") else None, speaker),
        }
        goal = _sentence(conditions.get("text_instruction") or conditions.get("scene") or "")
        narration = f'{goal} {speaker} said, "{utterance}"'.strip()
        doing = "; ".join(
            f"{c.get('name')}: {c.get('action')}" for c in characters if c.get("action")
        )
        style = str(metadata.get("style") or "storybook")
        prompt = f"{style} children's book illustration. {_sentence(conditions.get('scene'))}"
        if doing:
            prompt += f" {doing}."
        return PlannerResponse(_plan_json(narration, prompt.strip(), speech))


class CopyPlanner(Planner):
    """The "nothing happens" baseline: repeats the current narration as the next one.

    The utterance is the first quoted span of the current text (else its first sentence), spoken by
    "Narrator" with neutral/normal/normal labels; the image prompt is the current narration.
    """

    name = "copy"
    baseline = True
    version = "1"
    reads = ("current_text",)
    description = "repeats the current narration (nothing-happens baseline)"
    parameters = ()

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        from omnistory_core.kit.voices import resolve_gender

        text = " ".join(str(item["current_text"] or "").split())
        quoted = re.search(r"[\"“]([^\"”]+)[\"”]", text)
        utterance = quoted.group(1) if quoted else re.split(r"(?<=[.!?])\s", text)[0]
        speech = {
            "speaker": "Narrator",
            "utterance": utterance.strip() or text,
            "emotion": "neutral",
            "speed": "normal",
            "pitch": "normal",
            "gender": resolve_gender(None, "Narrator"),
        }
        return PlannerResponse(_plan_json(text, text, speech))


class OraclePlanner(Planner):
    """ORACLE: returns the reference narration and target speech.  For validating metrics only."""

    name = "oracle"
    baseline = True
    version = "1"
    oracle = True
    reads = ("reference_text", "reference_speech", "conditions")
    description = "ORACLE: the reference narration and speech (metric validation only)"
    parameters = ()

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        speech = dict(item["reference_speech"])
        scene = str((item["conditions"] or {}).get("scene") or "") or item["reference_text"]
        return PlannerResponse(_plan_json(item["reference_text"], scene, speech))


class NoopPlanner(Planner):
    """A constant plan, one call per example: measures framework overhead.

    ``delay_s`` (runtime only, not in the cache key) simulates model latency.
    """

    name = "noop"
    baseline = True
    version = "1"
    reads = ("current_text",)
    description = "constant plan (framework-overhead measurements)"
    parameters = (
        Param("delay_s", float, 0.0, "simulated model latency in seconds", runtime=True, ge=0),
    )

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        time.sleep(self.params["delay_s"])
        speech = {
            "speaker": "Narrator",
            "utterance": "Hello.",
            "emotion": "neutral",
            "speed": "normal",
            "pitch": "normal",
            "gender": "female",
        }
        return PlannerResponse(_plan_json("Nothing happens.", "a blank page", speech))


PLANNERS = (TemplatePlanner, CopyPlanner, OraclePlanner, NoopPlanner)
