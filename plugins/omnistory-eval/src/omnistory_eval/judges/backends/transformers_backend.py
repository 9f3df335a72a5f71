"""Judging with Hugging Face Transformers: the paper's backend for Audio Flamingo Next.

The checkpoint's processor renders the judge's messages through its chat template (audio parts
are loaded from their paths by the processor), the model generates greedily one request at a time
(App. E.3.1: sequential requests, ``do_sample=False``, repetition penalty 1.0, seed 0, at most 1024
new tokens, the model's default context), and the new tokens are decoded without special tokens.

Parameters: ``checkpoint`` (a hub id or local directory), ``model_class`` (Transformers auto class;
default ``AutoModelForSeq2SeqLM``, which maps Audio Flamingo Next's ``musicflamingo`` type to its
generation class), ``device`` (default ``cuda`` when available), ``dtype`` (default bfloat16 on
GPU, float32 on CPU), ``trust_remote_code``.
"""

from __future__ import annotations

from typing import Any

from omnistory_eval.judges.backends.base import (
    Decoding,
    Generation,
    exception_generation,
)
from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.specs import JudgeSpec

DEFAULT_MODEL_CLASS = "AutoModelForSeq2SeqLM"


class TransformersBackend:
    def __init__(self, spec: JudgeSpec, params: dict[str, Any]):
        self.spec = spec
        self.params = params
        self.decoding = Decoding.from_spec(spec, params)
        self.checkpoint = str(params.get("checkpoint") or spec.checkpoint)
        self.processor: Any = None
        self.model: Any = None

    def load(self) -> None:
        import torch
        import transformers

        device = self.params.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        default_dtype = "bfloat16" if device.startswith("cuda") else "float32"
        dtype_name = self.params.get("dtype") or default_dtype
        class_name = str(self.params.get("model_class") or DEFAULT_MODEL_CLASS)
        model_class = getattr(transformers, class_name, None)
        if model_class is None:
            raise ValueError(
                f"judge {self.spec.id}: transformers {transformers.__version__} has no {class_name}"
            )
        trust = bool(self.params.get("trust_remote_code", self.spec.trust_remote_code))
        self.processor = transformers.AutoProcessor.from_pretrained(
            self.checkpoint, trust_remote_code=trust
        )
        model = model_class.from_pretrained(
            self.checkpoint, dtype=getattr(torch, dtype_name), trust_remote_code=trust
        )
        self.model = model.to(device).eval()

    def close(self) -> None:
        self.model = None
        self.processor = None
        import gc

        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def _generate_one(self, prompt: RenderedPrompt) -> Generation:
        import torch
        import transformers

        d = self.decoding
        inputs = self.processor.apply_chat_template(
            [prompt.messages],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=True,
            return_tensors="pt",
            **prompt.chat_template_kwargs,
        ).to(self.model.device)
        features = inputs.get("input_features")
        if isinstance(features, torch.Tensor) and features.is_floating_point():
            inputs["input_features"] = features.to(self.model.dtype)
        options: dict[str, Any] = {
            "max_new_tokens": d.max_new_tokens,
            "do_sample": d.temperature > 0,
            "repetition_penalty": d.repetition_penalty,
        }
        if d.temperature > 0:
            options.update(temperature=d.temperature, top_p=d.top_p)
        transformers.set_seed(d.seed)  # per request, so results do not depend on item order
        with torch.inference_mode():
            output = self.model.generate(**inputs, **options)
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        text = self.processor.batch_decode(
            new_tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )[0]
        finish = "length" if new_tokens.shape[1] >= d.max_new_tokens else "stop"
        return Generation(
            text=text.strip(),
            finish_reason=finish,
            usage={
                "prompt_tokens": int(inputs["input_ids"].shape[1]),
                "completion_tokens": int(new_tokens.shape[1]),
            },
        )

    def generate(self, prompts: list[RenderedPrompt]) -> list[Generation]:
        if self.model is None:
            self.load()
        results = []
        for prompt in prompts:
            try:
                results.append(self._generate_one(prompt))
            except Exception as exc:  # noqa: BLE001 - recorded as this item's inference failure
                results.append(exception_generation(exc))
        return results
