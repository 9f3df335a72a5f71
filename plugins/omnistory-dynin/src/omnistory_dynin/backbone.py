"""``backbone=dynin``: Dynin-Omni as an any-to-any backbone (text, image and speech in one pass).

Two backends (``backbone.backend``):

* ``transformers`` (default): the benchmark's Dynin-Omni runner, reimplemented -- one joint
  masked-diffusion pass per example over the TI2TIS sequence (:mod:`omnistory_dynin.layout`,
  :mod:`omnistory_dynin.sampler`), decoded by MAGVIT-v2 and the EMOVA speech decoder
  (:mod:`omnistory_dynin.local`).  Needs a checkout of AIDASLab/Dynin-Omni
  (``backbone.source_dir``) and, in practice, its own environment (``requirements``).
* ``vllm_omni``: one request per example to a vLLM-Omni server (:mod:`omnistory_dynin.remote`),
  optionally started by the backbone (``backbone.launch=true``).

Failures: the official runner publishes a sample only when its text, image and speech are all
valid (``all_or_nothing: true``, the default); with ``all_or_nothing: false`` each modality fails on
its own and the others are kept.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from omnistory_core.api import (
    MODALITIES,
    Backbone,
    BackboneOutput,
    ComponentError,
    ConfigError,
    Failure,
)
from omnistory_dynin.params import (
    DEFAULTS,
    NAME,
    OUTPUT_PARAMS,
    PARAMETERS,
    ParamError,
    check_params,
)
from omnistory_dynin.source import PINNED_COMMIT, SourceError, check_source_dir

log = logging.getLogger("omnistory")

#: the official environment of the transformers backend: Python 3.10, the Dynin-Omni checkout's
#: requirements.txt pins used by inference, and the benchmark runner's extra pins.  numpy is the
#: one deviation: the checkout pins 1.23.5, omnistory-core needs >= 1.24 (see README).
DYNIN_REQUIREMENTS: tuple[str, ...] = (
    "torch==2.7.1",
    "torchvision==0.22.1",
    "transformers==4.47.1",
    "tokenizers==0.21.2",
    "diffusers==0.32.2",
    "accelerate==1.8.1",
    "huggingface_hub==0.33.4",
    "safetensors==0.5.3",
    "soundfile==0.13.1",
    "sentencepiece==0.1.99",
    "protobuf==3.20.0",
    "omegaconf==2.3.0",
    "jaxtyping==0.3.2",
    "typeguard==4.4.4",
    "einops",
    "numpy>=1.24,<2",
    "pillow",
)


def assemble(
    results: dict[str, Any], usage: dict[str, Any], all_or_nothing: bool
) -> BackboneOutput:
    """The backbone output of one example from per-modality values or Failures."""
    failures = {m: results[m] for m in MODALITIES if isinstance(results[m], Failure)}
    out = BackboneOutput(usage=usage)
    if failures and all_or_nothing:
        cause_modality, cause = next(iter(failures.items()))
        reasons = "; ".join(f"{m}: {f.message}" for m, f in failures.items())
        for modality in MODALITIES:
            if modality in failures:
                out.failures[modality] = failures[modality]
            else:
                out.failures[modality] = Failure(
                    cause.category,
                    f"{modality} discarded with the whole example (all_or_nothing=true, as the "
                    f"official runner): {reasons}",
                )
        usage["discarded"] = sorted(set(MODALITIES) - set(failures))
        usage["failed_first"] = cause_modality
        return out
    out.failures.update(failures)
    if not isinstance(results["text"], Failure):
        out.text = results["text"]
    if not isinstance(results["image"], Failure):
        out.image = results["image"]
    if not isinstance(results["speech"], Failure):
        out.speech = results["speech"]
    return out


class DyninOmni(Backbone):
    """Dynin-Omni (masked-diffusion omnimodal LM): next-page text, illustration and speech."""

    name = NAME
    version = "1"
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    parameters = PARAMETERS
    default_batch_size = 1
    description = "Dynin-Omni: text, image and speech in one joint masked-diffusion pass"
    requirements: ClassVar[tuple[str, ...]] = DYNIN_REQUIREMENTS

    def __init__(self, **params: Any):
        super().__init__(**params)
        try:
            self.settings = check_params(self.params)
            if self.settings["backend"] == "transformers":
                self.source_dir = check_source_dir(self.settings["source_dir"])
            else:
                self.source_dir = None
        except (ParamError, SourceError) as exc:
            raise ConfigError(str(exc)) from None
        self.source_digest: str | None = None
        self.source_revision: str | None = None
        if self.source_dir is not None:
            from omnistory_dynin.source import git_revision, tree_digest

            self.source_digest = tree_digest(self.source_dir)
            self.source_revision = git_revision(self.source_dir)
        self._parts: Any = None
        self._remote: Any = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Hub ids ``prefetch`` downloads (the model only for ``vllm_omni``; its server fetches
        what it needs).  ``params`` is the raw config (``name`` and all), not validated here."""
        p = {**DEFAULTS, **{k: v for k, v in params.items() if k in DEFAULTS and v is not None}}
        if p["backend"] == "vllm_omni":
            return [str(p["model"])]
        ids = [str(p[k]) for k in ("model", "image_codec", "speech_codec", "speech_runtime_repo")]
        return list(dict.fromkeys(ids))

    def output_params(self) -> dict[str, Any]:
        """What changes this backend's outputs: its settings (layout normalised), and for the
        ``transformers`` backend the checkout's code by content (its path is runtime-only)."""
        s = self.settings
        backend = s["backend"]
        params: dict[str, Any] = {"backend": backend}
        for key in OUTPUT_PARAMS[backend]:
            value = s[key]
            params[key] = value.to_dict() if key == "token_layout" else value
        if self.source_digest is not None:
            params["source_tree"] = self.source_digest
        return params

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        if self.settings["backend"] == "vllm_omni":
            from omnistory_dynin.remote import RemoteDynin

            if self._remote is None:
                self._remote = RemoteDynin(self.settings)
            self._remote.load()
            return
        if self._parts is not None:
            return
        if self.source_revision and self.source_revision != PINNED_COMMIT:
            log.warning(
                "backbone=dynin: %s is at commit %s, not %s (the benchmark runner's)",
                self.source_dir,
                self.source_revision[:12],
                PINNED_COMMIT[:12],
            )
        from omnistory_dynin import local

        try:
            self._parts = local.load(self.settings, self.source_dir)
        except Exception as exc:
            raise ComponentError(
                f"backbone=dynin: cannot load Dynin-Omni ({type(exc).__name__}: {exc}); its "
                "environment is built with `python -m omnistory_core env create backbone=dynin "
                "--python python3.10` (see the omnistory-dynin README) and used with "
                "backbone.runner.python=<that venv>/bin/python"
            ) from exc

    def unload(self) -> None:
        self._parts = None
        remote, self._remote = self._remote, None
        if remote is not None:
            remote.unload()
        try:
            import torch
        except ImportError:
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @property
    def server(self) -> Any:
        """The vLLM-Omni server this backbone started (``launch=true``), if any."""
        return None if self._remote is None else self._remote.server

    # -- calls -------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        if self.settings["backend"] == "vllm_omni":
            from omnistory_core.kit.retry import map_bounded

            return map_bounded(self._run, items, int(self.settings["max_concurrency"]))
        results: list[Any] = []
        for item in items:
            try:
                results.append(self._run(item))
            except Exception as exc:  # noqa: BLE001 - one example's failure is its result
                results.append(exc)
        return results

    def run_one(self, item: dict[str, Any]) -> Any:
        result = self.run_batch([item])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _run(self, item: dict[str, Any]) -> BackboneOutput:
        if self.settings["backend"] == "vllm_omni":
            out = self._remote.run_example(item)
        else:
            out = self._run_local(item)
        usage = out.pop("usage")
        return assemble(out, usage, bool(self.settings["all_or_nothing"]))

    def _run_local(self, item: dict[str, Any]) -> dict[str, Any]:
        from omnistory_dynin import local
        from omnistory_dynin.layout import LayoutError
        from omnistory_dynin.sampler import SamplingError

        try:
            out = local.run_example(self._parts, self.settings, item)
        except (LayoutError, SamplingError) as exc:
            raise ComponentError(f"backbone=dynin: {exc}", category="model_error") from exc
        if self.source_revision:
            out["usage"]["source_revision"] = self.source_revision
        return out
