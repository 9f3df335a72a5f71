"""Three offline, deterministic backbones: the template for adding an omnimodal model.

* ``example_omni`` -- any-to-any: narration, illustration and speech from ONE call;
* ``example_ti`` -- semi-orchestration T+I: narration and illustration; a TTS expert speaks the
  ``plan["speech"]`` it returns;
* ``example_ts`` -- semi-orchestration T+S: narration and speech; an image expert draws the
  ``plan["image_prompt"]`` it returns.

They are not models: the "model" writes the next page from the conditions (the text goal, the first
speaking character's intent), "draws" by shifting the current page's palette towards a colour taken
from the scene, and "speaks" with eSpeak NG.  What to copy is the shape:

* declare ``produces`` and (optionally) ``reads``; import heavy libraries in ``load()`` only;
* return one :class:`BackboneOutput` per item, with the plan fields of the modalities you do not
  make, and a :class:`Failure` per modality the model could not make (the others survive);
* declare every parameter once (``parameters``: type, default, doc); the core validates them when
  the backbone is built, generates its config node (no yaml needed) and puts all but the runtime
  ones into the cache key.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from omnistory_core.api import (
    MODALITIES,
    Audio,
    Backbone,
    BackboneOutput,
    Failure,
    Param,
    ParamError,
)


def speaking_character(conditions: dict[str, Any]) -> dict[str, Any]:
    """The first character of the next page with something to say (else the first one)."""
    characters = [c for c in conditions.get("characters") or [] if isinstance(c, dict)]
    speaking = [c for c in characters if str(c.get("speech_intent") or "").strip()]
    silent = ("stays silent", "silent", "none", "says nothing")
    talkers = [c for c in speaking if str(c["speech_intent"]).strip().lower() not in silent]
    return (talkers or speaking or characters or [{}])[0]


def speech_plan(conditions: dict[str, Any], metadata: dict[str, Any]) -> dict[str, str]:
    """The plan's ``speech`` object: who speaks, what, and how (labels from the page's mood)."""
    character = speaking_character(conditions)
    name = str(character.get("name") or "Narrator")
    intent = str(character.get("speech_intent") or "").strip().rstrip(".")
    utterance = f"{intent[:1].upper()}{intent[1:]}!" if intent else "Look at this!"
    sexes = {
        str(c.get("name", "")).lower(): str(c.get("sex", "")).lower()
        for c in metadata.get("characters") or []
        if isinstance(c, dict)
    }
    mood = str(character.get("emotion") or "").lower()
    emotion = next(
        (label for label, words in _MOODS.items() if any(w in mood for w in words)), "neutral"
    )
    return {
        "utterance": utterance,
        "speaker": name,
        "emotion": emotion,
        "speed": "fast" if emotion in ("angry", "happy") or "urgent" in mood else "normal",
        "pitch": "high" if emotion == "happy" else "low" if emotion == "sad" else "normal",
        "gender": sexes.get(name.lower())
        if sexes.get(name.lower()) in ("female", "male")
        else "female",
    }


_MOODS = {
    "angry": ("angry", "cross", "furious", "grumpy"),
    "happy": ("happy", "joy", "excited", "delighted", "proud", "cheerful"),
    "sad": ("sad", "upset", "worried", "lonely", "scared"),
}


def narration(conditions: dict[str, Any], speech: dict[str, str]) -> str:
    """The next page's text: its goal, with the spoken line kept inside it."""
    goal = str(conditions.get("text_instruction") or "").strip().rstrip(".")
    scene = str(conditions.get("scene") or "").split(";")[0].strip()
    first = f"{scene[:1].upper()}{scene[1:]}." if scene else ""
    return " ".join(
        part
        for part in (
            first,
            f"{goal}." if goal else "",
            f'"{speech["utterance"]}" said {speech["speaker"]}.',
        )
        if part
    )


def scene_colour(conditions: dict[str, Any]) -> tuple[int, int, int]:
    digest = hashlib.sha256(str(conditions.get("scene") or "").encode("utf-8")).digest()
    return digest[0], digest[1], digest[2]


class _ExampleBackbone(Backbone):
    version = "1"
    reads = ("current_image", "current_text", "metadata", "conditions")
    requirements: ClassVar[tuple[str, ...]] = ("pillow>=10", "numpy>=1.24")
    parameters = (
        Param(
            "omit",
            (list, str),
            [],
            "modalities to leave out of the output, e.g. [speech] (how omissions are recorded)",
        ),
        Param(
            "omit_category",
            str,
            None,
            "category for those omissions (null: the engine records backbone_no_<modality>)",
        ),
        Param(
            "tint",
            float,
            0.35,
            "palette shift of the drawn page towards the scene colour",
            ge=0,
            le=1,
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        omit = self.params["omit"]
        omit = [omit] if isinstance(omit, str) else list(omit)
        if any(m not in MODALITIES for m in omit):
            # a rule the declaration cannot express: the same one-line error
            raise ParamError(
                f"backbone={self.name}: omit must be a list of {list(MODALITIES)}, got {omit!r}"
            )
        self.params["omit"] = sorted(set(omit))
        self._speak = None

    def load(self) -> None:
        # A real model loads its weights here, once, on the first cache miss.
        from omnistory_core.builtin.espeak_tts import EspeakTTS

        tts = EspeakTTS(seed=int(self.params["seed"]))
        tts.load()
        self._speak = tts

    def unload(self) -> None:
        self._speak = None

    def draw(self, item: dict[str, Any]):
        """The next illustration: the current page, its palette pulled towards the scene."""
        from PIL import Image

        page = item["current_image"].open_image()
        overlay = Image.new("RGB", page.size, scene_colour(item["conditions"]))
        return Image.blend(page, overlay, float(self.params["tint"]))

    def speak(self, speech: dict[str, str]) -> Audio | Failure:
        assert self._speak is not None, "load() first"
        return self._speak.run_one(speech)

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        conditions, metadata = item["conditions"] or {}, item["metadata"] or {}
        speech = speech_plan(conditions, metadata)
        out = BackboneOutput(text=narration(conditions, speech), usage={"passes": 1})
        if "image" in self.produces:
            out.image = self.draw(item)
        else:
            out.plan = {"image_prompt": str(conditions.get("scene") or "")}
        if "speech" in self.produces:
            audio = self.speak(speech)
            if isinstance(audio, Failure):
                out.failures["speech"] = audio
            else:
                out.speech = audio
        else:
            out.plan = {**(out.plan or {}), "speech": speech}
        for modality in self.params["omit"]:
            setattr(out, modality, None)
            if self.params["omit_category"]:
                out.failures[modality] = Failure(
                    str(self.params["omit_category"]), f"{self.name} left out {modality}"
                )
        return out


class ExampleOmni(_ExampleBackbone):
    """Any-to-any: narration, illustration and speech from one call."""

    name = "example_omni"
    produces = frozenset({"text", "image", "speech"})
    description = "offline example any-to-any backbone (template for model authors)"


class ExampleTextImage(_ExampleBackbone):
    """Semi-orchestration T+I: narration and illustration; a TTS expert speaks plan['speech']."""

    name = "example_ti"
    produces = frozenset({"text", "image"})
    description = "offline example T+I backbone (a TTS expert speaks its plan)"


class ExampleTextSpeech(_ExampleBackbone):
    """Semi-orchestration T+S: narration and speech; an image expert draws plan['image_prompt']."""

    name = "example_ts"
    produces = frozenset({"text", "speech"})
    description = "offline example T+S backbone (an image expert draws its plan)"
