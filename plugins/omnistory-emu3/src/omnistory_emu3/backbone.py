"""``backbone=emu3``: Emu3 as the semi-orchestration text+image backbone of Omni-StoryBench.

Per example (one cached record), as the official ``Emu3Orchestrator`` does:

1. understanding, Emu3-Chat: the current page image and our request (instructions + story summary)
   -> a JSON answer ``{text, t2i, quote}``, parsed best-effort; without a usable text, t2i or quote
   the whole example fails (``plan_json_error`` / ``plan_missing_field``), and a quote missing from
   the narration is put into it (recorded in ``usage["repairs"]``);
2. generation, Emu3-Gen: ``t2i`` + the quality suffix, classifier-free guidance against the negative
   prompt, prefix-constrained sampling of visual tokens, decoded by the VQ-VAE; the current page is
   not shown.  A failure here loses the image only;
3. the speech plan for the TTS expert: the quote in ``default_voice``.  The official runner asks
   the model for no voice: it always speaks the quote as Narrator / neutral / normal / normal /
   female, which is this parameter's default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from omnistory_core.api import Backbone, BackboneOutput, ComponentError, ParamError, SettingsError
from omnistory_core.kit.diffusion import (
    exception_failure,
    item_seed,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
)
from omnistory_emu3.prompting import ChatOutputError, chat_prompt, read_chat_answer, speech_plan
from omnistory_emu3.settings import DEFAULT_MODELS, PARAMETERS, Emu3Settings, parse_settings

#: what the native implementation needs (transformers gained models/emu3 in 4.48)
NATIVE_REQUIREMENTS: tuple[str, ...] = (
    "transformers>=4.48",
    "torch>=2.1",
    "accelerate>=0.26",
    "pillow>=10",
)
#: the upstream repository's pins (requirements.txt), for ``implementation=remote_code``; numpy<2
#: because torch 2.2.1 was built against numpy 1.x; flash-attn==2.5.7 is optional (README)
REMOTE_CODE_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.2.1",
    "transformers==4.44.0",
    "tiktoken==0.6.0",
    "numpy<2",
    "pillow",
    "accelerate",
)

#: how many characters of an unusable answer a failure message quotes
RAW_PREVIEW = 300


class Emu3(Backbone):
    """BAAI Emu3: Emu3-Chat writes the next page (text, image description, quote) from the
    current page, Emu3-Gen draws the image; a TTS expert speaks the quote."""

    name = "emu3"
    version = "1"
    produces = frozenset({"text", "image"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    parameters = PARAMETERS
    default_batch_size = 1
    description = (
        "Emu3 (BAAI): Emu3-Chat text + Emu3-Gen image; the quote goes to a TTS expert "
        "(semi-orchestration T+I)"
    )
    requirements: ClassVar[tuple[str, ...]] = NATIVE_REQUIREMENTS

    def __init__(self, **params: Any):
        super().__init__(**params)
        try:
            self.settings: Emu3Settings = parse_settings(f"backbone={self.name}", self.params)
        except SettingsError as exc:
            raise ParamError(str(exc)) from None
        self.engine: Any = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Hub ids to prefetch: Chat, Gen, and for remote_code the vision tokenizer."""
        implementation = params.get("implementation") or "native"
        defaults = DEFAULT_MODELS.get(implementation, DEFAULT_MODELS["native"])
        ids = [
            params.get("chat_model") or defaults["chat"],
            params.get("gen_model") or defaults["gen"],
        ]
        if implementation == "remote_code":
            ids.append(params.get("vq_model") or defaults["vq"])
        return [str(i) for i in ids if i]

    def output_params(self) -> dict[str, Any]:
        # the checkpoints actually used, not the null that stands for the default
        params = super().output_params()
        s = self.settings
        params.update(chat_model=s.chat_model, gen_model=s.gen_model, vq_model=s.vq_model)
        params["default_voice"] = dict(s.default_voice)
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        device = resolve_device(self.settings.device)
        dtype = resolve_dtype(self.settings.dtype, device)
        if self.settings.implementation == "native":
            from omnistory_emu3.native import NativeEmu3

            self.engine = NativeEmu3(self.settings, device, dtype)
        else:
            from omnistory_emu3.remote import RemoteCodeEmu3

            self.engine = RemoteCodeEmu3(self.settings, device, dtype)

    def unload(self) -> None:
        self.engine = None
        release_cuda_memory()

    # -- calls -----------------------------------------------------------------------------
    def request(self, item: dict[str, Any]) -> str:
        """The understanding request for one example (instructions + story summary)."""
        return chat_prompt(item.get("metadata"), item.get("current_text"), item.get("conditions"))

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        if self.engine is None:
            self.load()
        s = self.settings
        request = self.request(item)
        media = item["current_image"]
        image = media.open_image()
        chat_seed = item_seed(s.seed, "chat", request, media.sha256)
        raw, usage = self.engine.understand(image, request, chat_seed)
        usage = {"implementation": s.implementation, **usage, "raw_output": raw}
        try:
            answer = read_chat_answer(raw)
        except ChatOutputError as exc:
            preview = raw if len(raw) <= RAW_PREVIEW else raw[:RAW_PREVIEW] + "..."
            raise ComponentError(f"{exc}; answer: {preview!r}", exc.category) from None
        usage.update(t2i=answer.t2i, quote=answer.quote, repairs=answer.repairs)
        output = BackboneOutput(
            text=answer.text,
            plan=speech_plan(answer.quote, s.default_voice),
            usage=usage,
        )
        try:
            output.image, image_usage = self.generate_image(answer.t2i, s.seed)
            usage.update(image_usage)
        except Exception as exc:  # noqa: BLE001 - the image only: text and speech survive
            output.failures["image"] = exception_failure(exc)
            release_cuda_memory()
        return output

    def generate_image(self, t2i: str, seed: int) -> tuple[Any, dict[str, Any]]:
        """Emu3-Gen's picture for an image description (the quality suffix is appended here)."""
        if self.engine is None:
            self.load()
        prompt = t2i.strip() + self.settings.quality_suffix
        return self.engine.generate_image(prompt, item_seed(seed, "gen", prompt))


BACKBONES = (Emu3,)
