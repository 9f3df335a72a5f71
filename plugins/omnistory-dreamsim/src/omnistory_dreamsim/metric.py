"""``dreamsim``/``distance``: DreamSim distance between the generated and the gold next-page image.

Paper App. F.2: "the default DreamSim ensemble and its official preprocessing"; lower distance =
perceptually closer; missing images are excluded (the engine writes ``missing_output`` rows).  The
model comes from the ``dreamsim`` package (``dreamsim.dreamsim(pretrained=True, ...)``): images are
converted to RGB and preprocessed by the function it returns (bicubic resize to 224x224, [0, 1]
tensor), embedded with ``model.embed`` (normalized ensemble features by default) and compared as
``1 - cosine`` — the same quantity ``model(img_a, img_b)`` returns, computed once per image so
shared gold images are embedded once.

DreamSim is a supplementary diagnostic: it is not part of the image modality score or the Total
Average (paper Table 32), and analysis code must treat its rows that way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param

INSTALL_HINT = "pip install 'omnistory-dreamsim[model]'"


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "omnistory" / "dreamsim")


def cosine_distance(a: Any, b: Any) -> float:
    """``1 - cos(a, b)`` of two 1-D embeddings (torch tensors or numpy arrays)."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    if denom == 0.0:
        raise ValueError("cosine distance of a zero embedding is undefined")
    return 1.0 - float(a @ b) / denom


class DreamSimMetric(Metric):
    """DreamSim distance; parameters are declared below (``plugins --params metric=dreamsim``)."""

    name = "dreamsim"
    version = "1"
    track = "image"
    criteria = ("distance",)
    score_range = (0.0, 2.0)  # 1 - cosine
    reads = ("candidate_image", "reference_image")
    default_batch_size = 16
    description = "DreamSim perceptual distance to the gold image (supplementary, lower is better)"
    parameters = (
        Param(
            "dreamsim_type",
            str,
            "ensemble",
            "DreamSim's dreamsim_type: the default ensemble or one of its single backbones",
        ),
        Param("normalize_embeds", bool, True, "normalise the embeddings (DreamSim's default)"),
        Param(
            "cache_dir",
            (str, None),
            None,
            "where DreamSim keeps its weights (null: ~/.cache/omnistory/dreamsim)",
            runtime=True,
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("cache_size", int, 4096, "image embeddings kept in memory", runtime=True, ge=1),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._model: Any = None
        self._preprocess: Any = None
        self._device = "cpu"
        self._cache: dict[str, Any] = {}

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        return [f"dreamsim:{params.get('dreamsim_type') or 'ensemble'}"]

    def load(self) -> None:
        try:
            import torch
            from dreamsim import dreamsim
        except ImportError as exc:
            raise ComponentError(
                f"skipped: the dreamsim package is not installed ({exc}); {INSTALL_HINT}"
            ) from exc
        device = self.params.get("device") or "auto"
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = device
        cache_dir = self.params.get("cache_dir") or default_cache_dir()
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        try:
            self._model, self._preprocess = dreamsim(
                pretrained=True,
                device=self._device,
                cache_dir=cache_dir,
                normalize_embeds=bool(self.params["normalize_embeds"]),
                dreamsim_type=str(self.params["dreamsim_type"]),
            )
        except (OSError, ConnectionError) as exc:  # urllib's URLError is an OSError
            raise ComponentError(
                f"skipped: DreamSim {self.params['dreamsim_type']} weights not available offline "
                f"in {cache_dir}; run the prefetch command ({type(exc).__name__}: {exc})"
            ) from exc
        self._cache = {}

    def unload(self) -> None:
        self._model = self._preprocess = None
        self._cache = {}

    def embed(self, images: list[Any]) -> Any:
        """DreamSim embeddings (CPU float32), one row per PIL image."""
        import torch

        batch = torch.cat([self._preprocess(img) for img in images]).to(self._device)
        with torch.no_grad():
            emb = self._model.embed(batch)
        return emb.reshape(len(images), -1).float().cpu()

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        errors: dict[str, str] = {}
        todo: dict[str, Any] = {}
        for item in items:
            for key in ("candidate_image", "reference_image"):
                media = item.get(key)
                if media is None:
                    raise ValueError(f"evaluation item has no {key!r}")
                if media.sha256 in self._cache or media.sha256 in todo or media.sha256 in errors:
                    continue
                try:
                    todo[media.sha256] = media.open_image()  # RGB
                except Exception as exc:  # one unreadable file invalidates only its items
                    errors[media.sha256] = f"{media.path}: {type(exc).__name__}: {exc}"
        keys = list(todo)
        for start in range(0, len(keys), max(1, 2 * self.batch_size)):
            chunk = keys[start : start + 2 * self.batch_size]
            rows = self.embed([todo[k] for k in chunk])
            for k, row in zip(chunk, rows, strict=True):
                self._cache[k] = row
        emb = {k: self._cache[k] for k in list(self._cache)}
        results = []
        for item in items:
            pair = (item["candidate_image"], item["reference_image"])
            bad = [errors[m.sha256] for m in pair if m.sha256 in errors]
            if bad:
                results.append(
                    EvalResult(
                        scores={"distance": None},
                        status="invalid",
                        detail={"error": "; ".join(bad)},
                    )
                )
            else:
                d = cosine_distance(emb[pair[0].sha256], emb[pair[1].sha256])
                results.append(EvalResult(scores={"distance": d}))
        limit = int(self.params.get("cache_size") or 4096)
        while len(self._cache) > limit:
            self._cache.pop(next(iter(self._cache)))
        return results
