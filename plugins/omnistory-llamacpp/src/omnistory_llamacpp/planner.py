"""``planner=llamacpp``: a local GGUF model plans the next page, from text alone.

The small GGUF models that can be installed offline (Qwen2.5-Coder 0.5B/1.5B Instruct, see
:mod:`omnistory_llamacpp.models`) have no vision, so this planner is **text-only**: it does not
read the current page's illustration (``current_image`` is not in :attr:`reads`, and so not in
the cache key), and the prompt says the page is described by its narration only.  Everything
else is the project's planner prompt (:mod:`omnistory_core.kit.planning.prompts`, same variants)
and the raw answer goes to the engine's plan parser like every planner's.

Backends (:mod:`omnistory_llamacpp.backends`): ``llama_cpp`` (llama-cpp-python, the Plan schema
as a GBNF grammar) or ``transformers`` (its GGUF loader: no compiler, slower; the same schema
through llguidance).  With ``grammar`` on (the default) every answer not cut by ``max_tokens`` is
a schema-valid plan on either.  ``auto`` takes ``llama_cpp`` when it is installed; the backend
that ran, and the grammar library's version, are part of the cache key.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, Failure, Param, Planner, PlannerResponse
from omnistory_core.kit.planning.prompts import (
    PROMPT_VARIANTS,
    SYSTEM_PROMPT,
    get_variant,
    render_user_text,
)
from omnistory_core.kit.planning.usage import usage_record
from omnistory_llamacpp.backends import Sampling

BACKENDS = ("auto", "llama_cpp", "transformers")

#: the sentence of the project's prompt that a text-only model must not be told, and its stand-in
IMAGE_SENTENCE = "The current page illustration is attached."
TEXT_ONLY_SENTENCE = (
    "The current page illustration is not shown (this planner reads text only): the narration "
    "above is all you know about the current page."
)
SYSTEM_IMAGE_CLAUSE = "You are shown one page (its illustration and its narration)"
SYSTEM_TEXT_CLAUSE = "You are shown one page (its narration; its illustration is not shown)"

INSTALL_HINTS = {
    "llama_cpp": "pip install 'omnistory-llamacpp[llama-cpp]' (builds llama-cpp-python 0.3.36 from"
    " source: cmake and a C++ compiler; or pip install a wheel built once, see the README)",
    "transformers": "pip install 'omnistory-llamacpp[transformers]' (transformers, torch, gguf,"
    " llguidance)",
}
#: what holds the transformers backend to the Plan schema (``grammar=true``)
GRAMMAR_HINT = (
    "pip install 'omnistory-llamacpp[transformers]' (llguidance), or planner.grammar=false for"
    " unconstrained JSON"
)


#: the plan's JSON shape, appended to the prompt when no grammar holds the model to it: without
#: it the 0.5B Qwen wrote ``"speech"`` as a plain string on 3 of 3 demo examples (README)
SHAPE_HINT = (
    "Write the JSON object in exactly this shape, with your own values in place of the <...>:\n"
    '{"narration": "<the narration>", "image_prompt": "<the image prompt>", "speech": '
    '{"utterance": "<the words spoken>", "speaker": "<the name>", "emotion": '
    '"<angry|happy|neutral|sad>", "speed": "<slow|normal|fast>", "pitch": "<low|normal|high>", '
    '"gender": "<female|male>"}}'
)
SHAPE_HINTS = ("auto", "always", "never")


def text_only_prompt(
    item: dict[str, Any],
    variant_name: str,
    target_chars: int | None,
    *,
    shape_hint: bool = False,
) -> tuple[str, str]:
    """(system, user) of the project's prompt, reworded for a model that sees no image, with
    :data:`SHAPE_HINT` at the end when ``shape_hint``."""
    system = SYSTEM_PROMPT.replace(SYSTEM_IMAGE_CLAUSE, SYSTEM_TEXT_CLAUSE)
    user = render_user_text(item, get_variant(variant_name), target_chars)
    if IMAGE_SENTENCE in user:
        user = user.replace(IMAGE_SENTENCE, TEXT_ONLY_SENTENCE)
    else:  # the kit's wording changed: say it anyway rather than imply an image
        user = f"{TEXT_ONLY_SENTENCE}\n\n{user}"
    if shape_hint:
        user = f"{user}\n{SHAPE_HINT}"
    return system, user


_FINGERPRINTS: dict[tuple[str, int, int], str] = {}


def gguf_fingerprint(path: Path) -> str:
    """SHA-256 over the file's size, first and last 4 MiB (the header with every metadata key
    and the tensor index, and the last tensors): identifies a GGUF in the cache key without
    reading a gigabyte on every run.  Memoized per (path, size, mtime)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FINGERPRINTS:
        span = 4 << 20
        digest = hashlib.sha256(str(stat.st_size).encode())
        with path.open("rb") as handle:
            digest.update(handle.read(span))
            if stat.st_size > span:
                handle.seek(max(span, stat.st_size - span))
                digest.update(handle.read(span))
        _FINGERPRINTS[key] = digest.hexdigest()
    return _FINGERPRINTS[key]


def installed(backend: str) -> bool:
    modules = {"llama_cpp": ("llama_cpp",), "transformers": ("transformers", "torch", "gguf")}
    return all(importlib.util.find_spec(m) is not None for m in modules[backend])


class LlamaCppPlanner(Planner):
    """A local GGUF chat model as a text-only planner (llama-cpp-python or transformers), held to
    the Plan schema by a grammar on either backend."""

    name = "llamacpp"
    version = "1"
    description = "local GGUF model (text only; llama.cpp with the Plan schema as grammar)"
    reads = ("current_text", "metadata", "conditions")  # no current_image: the models are blind
    uses_gpu = False
    default_batch_size = 1
    requirements = ("llama-cpp-python==0.3.36",)

    parameters = (
        Param("model", (str, None), None, "the GGUF file (required)", weights=True),
        Param(
            "backend",
            str,
            "auto",
            "llama_cpp (llama-cpp-python) | transformers (no compiler, slower) | auto (llama_cpp if"
            " installed)",
            choices=BACKENDS,
        ),
        Param(
            "prompt",
            str,
            "default",
            "the project's prompt variant (reworded for a text-only model)",
            choices=tuple(sorted(PROMPT_VARIANTS)),
        ),
        Param("narration_target_chars", (int, None), None, "the variant's length target", ge=1),
        Param(
            "grammar",
            bool,
            True,
            "constrain decoding with the Plan schema (llama_cpp: its GBNF grammar; transformers:"
            " llguidance)",
        ),
        Param(
            "shape_hint",
            str,
            "auto",
            "end the prompt with the plan's JSON shape: auto (only without a grammar) | always |"
            " never",
            choices=SHAPE_HINTS,
        ),
        Param("n_ctx", int, 4096, "context window in tokens (prompt ~1000 + answer)", ge=256),
        Param("max_tokens", int, 512, "answer token limit", ge=1),
        Param("temperature", float, 0.0, "0: greedy (deterministic); > 0 samples from seed", ge=0),
        Param("top_p", float, 0.95, "nucleus sampling (temperature > 0 only)", gt=0, le=1),
        Param("top_k", int, 40, "top-k sampling (temperature > 0 only)", ge=0),
        Param(
            "repeat_penalty",
            float,
            1.1,
            "penalty on tokens already in the context (1: none); stops greedy loops",
            gt=0,
        ),
        Param(
            "threads",
            (int, None),
            None,
            "CPU threads; null: the library's default",
            runtime=True,
            ge=1,
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.backend: Any = None

    # -- configuration ---------------------------------------------------------------------
    def model_path(self) -> Path | None:
        model = self.params["model"]
        return Path(os.path.expanduser(str(model))) if model else None

    def backend_name(self) -> str:
        """The backend that runs: ``backend``, or for ``auto`` llama_cpp when it is installed."""
        choice = str(self.params["backend"])
        if choice != "auto":
            return choice
        return "llama_cpp" if installed("llama_cpp") else "transformers"

    def output_params(self) -> dict[str, Any]:
        """The declared parameters, the backend that runs and its version, the GGUF's fingerprint
        and a digest of the prompt wording (the kit's variant and the text-only rewording)."""
        from importlib.metadata import PackageNotFoundError, version

        params = super().output_params()
        backend = self.backend_name()
        params["backend"] = backend
        dists = [{"llama_cpp": "llama-cpp-python", "transformers": "transformers"}[backend]]
        if backend == "transformers" and bool(params.get("grammar")):
            dists.append("llguidance")  # its grammar compiler decides which tokens are allowed
        for dist in dists:
            try:
                params[dist] = version(dist)
            except PackageNotFoundError:
                params[dist] = "missing"
        path = self.model_path()
        params["gguf"] = (
            gguf_fingerprint(path) if path is not None and path.is_file() else "missing"
        )
        system, user = self.prompt({})
        params["prompt_sha256"] = hashlib.sha256(json.dumps([system, user]).encode()).hexdigest()
        return params

    # -- lifecycle -------------------------------------------------------------------------
    def preflight(self) -> None:
        """The GGUF exists and the backend's packages are installed (nothing is loaded)."""
        path = self.model_path()
        if path is None:
            raise ComponentError(
                "planner=llamacpp: planner.model is not set: give a GGUF file"
                " (planner.model=/path/model.gguf or OMNISTORY_MODEL_PLANNER_LLAMACPP)"
            )
        if not path.is_file():
            raise ComponentError(f"planner=llamacpp: planner.model: no such file {path}")
        with path.open("rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ComponentError(f"planner=llamacpp: planner.model: {path} is not a GGUF file")
        backend = self.backend_name()
        if not installed(backend):
            raise ComponentError(
                f"planner=llamacpp: backend {backend} is not installed; {INSTALL_HINTS[backend]}"
            )
        grammar = bool(self.params["grammar"])
        if backend == "transformers" and grammar and importlib.util.find_spec("llguidance") is None:
            raise ComponentError(
                f"planner=llamacpp: planner.grammar=true needs llguidance; {GRAMMAR_HINT}"
            )

    def load(self) -> None:
        self.preflight()
        path = self.model_path()
        assert path is not None
        threads = self.params["threads"]
        if self.backend_name() == "llama_cpp":
            from omnistory_llamacpp.backends import LlamaCppBackend

            try:
                self.backend = LlamaCppBackend(
                    path,
                    n_ctx=int(self.params["n_ctx"]),
                    threads=threads,
                    grammar=bool(self.params["grammar"]),
                )
            except ValueError as exc:  # llama_cpp raises ValueError for a file it cannot load
                raise ComponentError(
                    f"planner=llamacpp: llama.cpp cannot load {path}: {exc}"
                ) from None
        else:
            from omnistory_llamacpp.backends import TransformersBackend

            self.backend = TransformersBackend(
                path, threads=threads, grammar=bool(self.params["grammar"])
            )

    def unload(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()

    # -- calls -----------------------------------------------------------------------------
    def uses_shape_hint(self) -> bool:
        """Whether the prompt ends with the plan's JSON shape: ``shape_hint=always``, or ``auto``
        when no grammar constrains the answer (``grammar=false``)."""
        hint = str(self.params["shape_hint"])
        if hint != "auto":
            return hint == "always"
        return not bool(self.params["grammar"])

    def prompt(self, item: dict[str, Any]) -> tuple[str, str]:
        """The (system, user) messages for one example."""
        return text_only_prompt(
            item,
            str(self.params["prompt"]),
            self.params["narration_target_chars"],
            shape_hint=self.uses_shape_hint(),
        )

    def run_one(self, item: dict[str, Any]) -> PlannerResponse | Failure:
        system, user = self.prompt(item)
        if self.backend is None:
            self.load()
        p = self.params
        sampling = Sampling(
            max_tokens=int(p["max_tokens"]),
            temperature=float(p["temperature"]),
            top_p=float(p["top_p"]),
            top_k=int(p["top_k"]),
            seed=int(p["seed"]),
            repeat_penalty=float(p["repeat_penalty"]),
        )
        reply = self.backend.generate(system, user, sampling)
        grammar = int(self.backend.has_grammar and bool(p["grammar"]))
        usage = usage_record(
            Path(str(p["model"])).name,
            reply.input_tokens,
            reply.output_tokens,
            {},
            extra={"truncated_calls": int(reply.truncated), "grammar_calls": grammar},
        )
        return PlannerResponse(text=reply.text, usage=usage)


__all__ = [
    "BACKENDS",
    "IMAGE_SENTENCE",
    "SHAPE_HINT",
    "LlamaCppPlanner",
    "TEXT_ONLY_SENTENCE",
    "gguf_fingerprint",
    "text_only_prompt",
]
