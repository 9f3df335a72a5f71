"""Apparent speaker gender with the audeering wav2vec2 age/gender model (paper App. E.2).

Each trimmed 16 kHz waveform is cut into 3.0 s windows with a 1.5 s hop
(:func:`~omnistory_eval.speech_analysis.gender_windows`); every window is normalized
by the checkpoint's feature extractor and scored on its own; the female, male and child
probabilities are averaged over windows and the label is binarized from female vs male.
Windows of equal length (all full windows) are batched together, which does not change them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnistory_eval.metrics._common import batched, load_or_skip
from omnistory_eval.speech_analysis import (
    SAMPLE_RATE,
    binarize_gender,
    gender_windows,
)

PAPER_MODEL = "audeering/wav2vec2-large-robust-24-ft-age-gender"


@dataclass(frozen=True)
class GenderPrediction:
    label: str
    probabilities: dict[str, float]  # female, male, child averaged over windows
    windows: int


class AgeGenderClassifier:
    """Loads the checkpoint once; :meth:`predict` scores many waveforms."""

    def __init__(self, model: str = PAPER_MODEL, device: str = "cpu", batch_size: int = 16):
        self.model_id = model
        self.device = device
        self.batch_size = batch_size
        self._extractor: Any = None
        self._model: Any = None

    def load(self) -> None:
        from transformers import AutoFeatureExtractor

        from omnistory_eval.metrics._age_gender_nn import AgeGenderModel

        mid = self.model_id
        self._extractor = load_or_skip(mid, lambda: AutoFeatureExtractor.from_pretrained(mid))
        model = load_or_skip(mid, lambda: AgeGenderModel.from_pretrained(mid))
        # transformers declares PreTrainedModel.to as functools.wraps(torch.nn.Module.to), which
        # pyright reads as the unbound function (self = the device)
        self._model = model.eval().to(self.device)  # pyright: ignore[reportArgumentType]

    def window_probabilities(self, segments: list[Any]) -> list[list[float]]:
        """[female, male, child] per segment; equal-length segments share a forward pass."""
        import numpy as np
        import torch

        out: list[list[float] | None] = [None] * len(segments)
        by_length: dict[int, list[int]] = {}
        for i, seg in enumerate(segments):
            by_length.setdefault(len(seg), []).append(i)
        for indices in by_length.values():
            for chunk in batched(indices, self.batch_size):
                feats = self._extractor(
                    [np.asarray(segments[i], dtype=np.float32) for i in chunk],
                    sampling_rate=SAMPLE_RATE,
                    return_tensors="pt",
                )
                with torch.no_grad():
                    _, _, probs = self._model(feats["input_values"].to(self.device))
                for i, row in zip(chunk, probs.float().cpu().tolist(), strict=True):
                    out[i] = row
        return out  # type: ignore[return-value]

    def predict(self, waveforms: list[Any]) -> list[GenderPrediction | Exception]:
        segments: list[Any] = []
        owners: list[int] = []
        for n, wave in enumerate(waveforms):
            for start, end in gender_windows(len(wave)):
                segments.append(wave[start:end])
                owners.append(n)
        probs = self.window_probabilities(segments) if segments else []
        results: list[GenderPrediction | Exception] = []
        for n in range(len(waveforms)):
            rows = [p for p, owner in zip(probs, owners, strict=True) if owner == n]
            if not rows:
                results.append(ValueError("no audio to score for gender"))
                continue
            mean = [sum(r[k] for r in rows) / len(rows) for k in range(3)]
            female, male, child = mean
            results.append(
                GenderPrediction(
                    label=binarize_gender(female, male),
                    probabilities={"female": female, "male": male, "child": child},
                    windows=len(rows),
                )
            )
        return results
