"""Judging with vLLM's offline engine (``vllm.LLM``), the paper's backend for eleven judges.

UNVERIFIED: written against the vLLM 0.33 offline API (``LLM.chat``, ``LLM.generate`` with
``multi_modal_data``, ``SamplingParams(structured_outputs=StructuredOutputsParams(json=...))``)
but never run here (no GPU, no vLLM, no weights).

Engine settings follow App. E.3.1: bfloat16, tensor parallel 1, the Table 6 context limit as
``max_model_len``, ``max_num_seqs`` and GPU memory share per track, the track seed as engine seed,
three images / one audio clip per prompt and no video.  Prompt construction follows App. E.4:

* text judges: ``LLM.chat`` on the rendered messages with the judge's chat-template switches;
* MOSS-Audio / Kimi-Audio: the serialized prompt with the audio waveform;
* InternVL: the ``<image>``-flattened messages through the checkpoint's chat template;
* Qwen3-Omni: ``qwen_omni_utils.process_mm_info`` prepares the media, as in the paper's harness;
* other multimodal judges: the processor's chat template, media passed as ``multi_modal_data``.

Parameters: ``gpu_memory_utilization``, ``max_model_len``, ``tensor_parallel_size``,
``swap_space`` (GiB of CPU swap; absent: the paper's 8 GiB, :data:`PAPER_SWAP_SPACE_GIB`; null:
not sent, the engine's own default; dropped with a warning when the installed vLLM no longer accepts
it: it left ``EngineArgs`` in vLLM 0.18, and the V1 engine allocates no swap blocks at all),
``engine_kwargs`` (extra ``vllm.LLM`` arguments), ``batch_size`` (a judge declares them, with these
defaults, in :data:`omnistory_eval.judges.judge.JUDGE_PARAMETERS`).
"""

from __future__ import annotations

import logging
from typing import Any

from omnistory_eval.judges import media
from omnistory_eval.judges.backends.base import (
    Decoding,
    Generation,
    exception_generation,
)
from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.specs import PAPER_SWAP_SPACE_GIB, JudgeSpec

_MM_LIMITS = {
    "text": None,
    "image": {"image": 3, "video": 0},
    "speech": {"audio": 1, "image": 0, "video": 0},
    "omni": {"image": 3, "audio": 1, "video": 0},
}


log = logging.getLogger(__name__)


def engine_accepts(name: str) -> bool:
    """Whether the installed vLLM's ``EngineArgs`` has the field ``name`` (True if unknown)."""
    import dataclasses

    try:
        # optional dependency of the vLLM judges, absent where the package is type-checked
        from vllm.engine.arg_utils import EngineArgs  # pyright: ignore[reportMissingImports]
    except ImportError:
        return True
    return not dataclasses.is_dataclass(EngineArgs) or name in {
        f.name for f in dataclasses.fields(EngineArgs)
    }


def engine_arguments(spec: JudgeSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments for ``spec`` (pure, so they can be audited)."""
    args: dict[str, Any] = {
        "model": params.get("checkpoint") or spec.checkpoint,
        "dtype": "bfloat16",
        "tensor_parallel_size": int(params.get("tensor_parallel_size") or 1),
        "gpu_memory_utilization": float(
            params.get("gpu_memory_utilization") or spec.gpu_memory_utilization
        ),
        "max_num_seqs": int(params.get("max_num_seqs") or spec.max_num_seqs),
        "seed": Decoding.from_spec(spec, params).seed,
        "trust_remote_code": spec.trust_remote_code,
    }
    max_len = params.get("max_model_len") or spec.context_limit
    if max_len:
        args["max_model_len"] = int(max_len)
    if _MM_LIMITS[spec.track]:
        args["limit_mm_per_prompt"] = dict(_MM_LIMITS[spec.track])
    swap_space = params.get("swap_space", PAPER_SWAP_SPACE_GIB)  # null: leave it to the engine
    if swap_space is not None:
        args["swap_space"] = float(swap_space)
    args.update(spec.engine_kwargs)
    args.update(params.get("engine_kwargs") or {})
    return args


class VLLMOfflineBackend:
    def __init__(self, spec: JudgeSpec, params: dict[str, Any]):
        self.spec = spec
        self.params = params
        self.decoding = Decoding.from_spec(spec, params)
        self._llm: Any = None
        self._processor: Any = None

    def load(self) -> None:
        try:
            # optional dependency of the vLLM judges, absent where the package is type-checked
            from vllm import LLM  # pyright: ignore[reportMissingImports]
        except ImportError as exc:
            raise ImportError(
                f"judge {self.spec.id}: backend=vllm needs the vllm package (and a GPU). "
                f"Alternatively serve the model (vllm serve {self.spec.checkpoint}) and set "
                f"backend=openai base_url=http://HOST:PORT/v1"
            ) from exc

        args = engine_arguments(self.spec, self.params)
        if "swap_space" in args and not engine_accepts("swap_space"):
            log.warning(
                "judge %s: this vLLM has no swap_space (removed in 0.18; its V1 engine allocates "
                "no swap blocks), so the paper's %s GiB is not applied",
                self.spec.id,
                args.pop("swap_space"),
            )
        self._llm = LLM(**args)

    def close(self) -> None:
        if self._llm is None:
            return
        engine = getattr(self._llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self._llm = None
        self._processor = None
        import gc

        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    # -- prompt preparation ---------------------------------------------------------------
    def _get_processor(self) -> Any:
        if self._processor is None:
            from transformers import AutoProcessor

            self._processor = AutoProcessor.from_pretrained(
                self.params.get("checkpoint") or self.spec.checkpoint, trust_remote_code=True
            )
        return self._processor

    def _sampling_params(self, prompt: RenderedPrompt) -> Any:
        # optional dependency of the vLLM judges, absent where the package is type-checked
        from vllm import SamplingParams  # pyright: ignore[reportMissingImports]

        d = self.decoding
        kwargs: dict[str, Any] = {
            "temperature": d.temperature,
            "top_p": d.top_p,
            "repetition_penalty": d.repetition_penalty,
            "max_tokens": d.max_new_tokens,
        }
        if prompt.stop_token_ids:
            kwargs["stop_token_ids"] = list(prompt.stop_token_ids)
        if prompt.json_schema is not None:
            # optional dependency of the vLLM judges, absent where the package is type-checked
            from vllm.sampling_params import StructuredOutputsParams  # pyright: ignore[reportMissingImports]

            kwargs["structured_outputs"] = StructuredOutputsParams(json=prompt.json_schema)
        return SamplingParams(**kwargs)

    def _engine_input(self, prompt: RenderedPrompt) -> dict[str, Any]:
        if self.spec.id.startswith("omni-qwen3-omni"):
            return self._qwen_omni_input(prompt)
        images = [media.load_rgb_image(m.path) for m in prompt.media if m.kind == "image"]
        audios = [media.load_audio(m.path) for m in prompt.media if m.kind == "audio"]
        if prompt.prompt is not None:
            text = prompt.prompt
        else:
            messages = prompt.template_messages or prompt.messages
            text = self._get_processor().apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **prompt.chat_template_kwargs
            )
        data: dict[str, Any] = {}
        if images:
            data["image"] = images
        if audios:
            # Kimi-Audio's vLLM model takes one (waveform, rate) pair rather than a list
            data["audio"] = audios[0] if self.spec.framing == "kimi_audio" else audios
        return {"prompt": text, "multi_modal_data": data}

    def _qwen_omni_input(self, prompt: RenderedPrompt) -> dict[str, Any]:
        # optional dependency of the vLLM judges, absent where the package is type-checked
        from qwen_omni_utils import process_mm_info  # pyright: ignore[reportMissingImports]

        text = self._get_processor().apply_chat_template(
            prompt.messages,
            tokenize=False,
            add_generation_prompt=True,
            **prompt.chat_template_kwargs,
        )
        audios, images, videos = process_mm_info(prompt.messages, use_audio_in_video=False)
        data: dict[str, Any] = {}
        for key, value in (("image", images), ("audio", audios), ("video", videos)):
            if value is not None:
                data[key] = value
        return {
            "prompt": text,
            "multi_modal_data": data,
            "mm_processor_kwargs": {"use_audio_in_video": False},
        }

    # -- generation -----------------------------------------------------------------------
    def _run(self, prompts: list[RenderedPrompt]) -> list[Generation]:
        if self.spec.track == "text" and all(p.prompt is None for p in prompts):
            outputs = self._llm.chat(
                [p.messages for p in prompts],
                [self._sampling_params(p) for p in prompts],
                use_tqdm=False,
                chat_template_kwargs=prompts[0].chat_template_kwargs or None,
            )
        else:
            outputs = self._llm.generate(
                [self._engine_input(p) for p in prompts],
                [self._sampling_params(p) for p in prompts],
                use_tqdm=False,
            )
        results = []
        for output in outputs:
            completion = output.outputs[0] if output.outputs else None
            if completion is None:
                results.append(Generation(text=None, error="vLLM returned no completion"))
                continue
            results.append(
                Generation(
                    text=(completion.text or "").strip(),
                    finish_reason=completion.finish_reason,
                    usage={"completion_tokens": len(completion.token_ids or ())},
                )
            )
        return results

    def generate(self, prompts: list[RenderedPrompt]) -> list[Generation]:
        if self._llm is None:
            self.load()
        if not prompts:
            return []
        try:
            return self._run(prompts)
        except Exception as exc:  # noqa: BLE001 - one bad prompt must not fail its batch
            if len(prompts) == 1:
                return [exception_generation(exc)]
        results = []
        for prompt in prompts:
            try:
                results.extend(self._run([prompt]))
            except Exception as exc:  # noqa: BLE001 - recorded as this item's inference failure
                results.append(exception_generation(exc))
        return results
