"""The three emotion recognizers of the paper behind one call shape, in-process or as a worker.

Each backend maps a trimmed 16 kHz mono float32 waveform to the recognizer's raw output,
``(labels, scores)``, in its own label set; canonicalization to neutral/happy/sad/angry happens in
the parent (:func:`omnistory_eval.speech_analysis.canonical_distribution`).

* ``hubert``: ``superb/hubert-large-superb-er`` via ``AutoFeatureExtractor`` +
  ``AutoModelForAudioClassification``; softmax over logits; labels from ``config.id2label``.
* ``speechbrain``: ``speechbrain/emotion-recognition-wav2vec2-IEMOCAP`` via
  ``speechbrain.inference.interfaces.foreign_class(..., pymodule_file="custom_interface.py",
  classname="CustomEncoderWav2vec2Classifier")``; ``classify_batch`` on the waveform; scores are
  its ``out_prob`` (documented by SpeechBrain as log posteriors); labels from the label encoder.
  SpeechBrain needs torchaudio, which does not import beside every torch build.
* ``emotion2vec``: ``iic/emotion2vec_plus_large`` via ``funasr.AutoModel(model=..., hub="hf")``;
  ``generate(wave, granularity="utterance", extract_embedding=False)``; labels like
  ``"生气/angry"``.

Because those stacks pin different torch/torchaudio/transformers versions, any backend can run in
another Python environment: ``python emotion_backends.py --backend B --model M --device D`` reads
JSON lines ``{"id": ..., "npy": "/path/wave.npy"}`` on stdin and answers
``{"id": ..., "labels": [...], "scores": [...]}`` or ``{"id": ..., "error": "..."}`` on stdout,
after a first line ``{"ready": true}`` (or ``{"fatal": "...", "missing_checkpoint": bool}`` if
loading failed).  This file
imports nothing from omnistory_core so that it runs in an environment without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

Predictor = Callable[[Any], tuple[list[str], list[float]]]

#: emotion2vec's nine classes in output index order (used when funasr returns scores only)
EMOTION2VEC_ORDER = (
    "angry",
    "disgusted",
    "fearful",
    "happy",
    "neutral",
    "other",
    "sad",
    "surprised",
    "unknown",
)
#: index order of the IEMOCAP checkpoint's label encoder, if the encoder cannot be read
SPEECHBRAIN_FALLBACK_ORDER = ("neu", "ang", "hap", "sad")


def _torch_device(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def load_hubert(model: str, device: str) -> Predictor:
    import torch
    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification

    extractor = AutoFeatureExtractor.from_pretrained(model)
    net = AutoModelForAudioClassification.from_pretrained(model).eval().to(device)
    labels = [str(net.config.id2label[i]) for i in range(net.config.num_labels)]

    def predict(wave: Any) -> tuple[list[str], list[float]]:
        inputs = extractor(wave, sampling_rate=16000, return_tensors="pt")
        with torch.no_grad():
            logits = net(**{k: v.to(device) for k, v in inputs.items()}).logits[0]
        return labels, torch.softmax(logits.float(), dim=-1).cpu().tolist()

    return predict


def load_speechbrain(model: str, device: str) -> Predictor:
    import torch

    # speechbrain is installed in the speech environment only, not where the package is checked
    from speechbrain.inference.interfaces import foreign_class  # pyright: ignore[reportMissingImports]

    clf = foreign_class(
        source=model,
        pymodule_file="custom_interface.py",
        classname="CustomEncoderWav2vec2Classifier",
        run_opts={"device": _torch_device(device)},
    )
    encoder = getattr(clf.hparams, "label_encoder", None)
    ind2lab = getattr(encoder, "ind2lab", None) or {}

    def predict(wave: Any) -> tuple[list[str], list[float]]:
        batch = torch.as_tensor(wave, dtype=torch.float32).reshape(1, -1)
        out_prob, _score, _index, _text = clf.classify_batch(batch)
        scores = out_prob.detach().float().cpu().reshape(-1).tolist()
        labels: list[str]
        if ind2lab and len(ind2lab) == len(scores):
            labels = [str(ind2lab[i]) for i in range(len(scores))]
        elif len(scores) == len(SPEECHBRAIN_FALLBACK_ORDER):
            labels = list(SPEECHBRAIN_FALLBACK_ORDER)
        else:
            raise RuntimeError(f"speechbrain returned {len(scores)} scores and no label encoder")
        return labels, scores

    return predict


def parse_emotion2vec(result: Any) -> tuple[list[str], list[float]]:
    """(labels, scores) from ``funasr.AutoModel.generate`` output for one utterance."""
    item = result[0] if isinstance(result, list) and result else result
    if not isinstance(item, dict):
        raise RuntimeError(f"unexpected emotion2vec output: {result!r}")

    def flat(value: Any) -> list[Any]:
        if value is None:
            return []
        if hasattr(value, "tolist"):
            value = value.tolist()
        if isinstance(value, (list, tuple)):
            value = list(value)
            if len(value) == 1 and hasattr(value[0], "tolist"):
                value = [value[0].tolist()]
            if len(value) == 1 and isinstance(value[0], (list, tuple)):
                value = list(value[0])
            return value
        return [value]

    labels: list[str] = [str(x) for x in flat(item.get("labels"))]
    scores = [float(x) for x in flat(item.get("scores"))]
    if not labels and len(scores) == len(EMOTION2VEC_ORDER):
        labels = list(EMOTION2VEC_ORDER)
    if not scores or len(labels) != len(scores):
        raise RuntimeError(f"cannot pair emotion2vec labels and scores: {item!r}")
    return labels, scores


def load_emotion2vec(model: str, device: str, hub: str = "hf") -> Predictor:
    # funasr is installed in the speech environment only, not where the package is checked
    from funasr import AutoModel  # pyright: ignore[reportMissingImports]

    net = AutoModel(model=model, hub=hub, device=_torch_device(device), disable_update=True)

    def predict(wave: Any) -> tuple[list[str], list[float]]:
        result = net.generate(wave, granularity="utterance", extract_embedding=False, fs=16000)
        return parse_emotion2vec(result)

    return predict


BACKENDS: dict[str, Callable[..., Predictor]] = {
    "hubert": load_hubert,
    "speechbrain": load_speechbrain,
    "emotion2vec": load_emotion2vec,
}


def load_backend(backend: str, model: str, device: str = "cpu") -> Predictor:
    try:
        loader = BACKENDS[backend]
    except KeyError:
        known = sorted(BACKENDS)
        raise ValueError(f"unknown emotion backend {backend!r}; known: {known}") from None
    return loader(model, device)


def serve(predict: Predictor, stdin: Any, stdout: Any) -> None:
    """The worker loop: one JSON request per line until EOF."""
    import numpy as np

    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            wave = np.load(request["npy"]).astype(np.float32).reshape(-1)
            labels, scores = predict(wave)
            reply = {"id": request["id"], "labels": labels, "scores": scores}
        except Exception as exc:  # one bad item is reported, the worker keeps serving
            reply = {"id": request.get("id"), "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="emotion recognizer worker (JSON lines)")
    parser.add_argument("--backend", required=True, choices=sorted(BACKENDS))
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    # the libraries print progress on stdout; keep stdout for the protocol only
    protocol, sys.stdout = sys.stdout, sys.stderr
    try:
        predict = load_backend(args.backend, args.model, args.device)
    except Exception as exc:
        # the same test as the parent's is_missing_checkpoint (this file cannot import it)
        missing = isinstance(exc, OSError) or type(exc).__module__.startswith("huggingface_hub")
        protocol.write(
            json.dumps({"fatal": f"{type(exc).__name__}: {exc}", "missing_checkpoint": missing})
            + "\n"
        )
        protocol.flush()
        return 1
    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    serve(predict, sys.stdin, protocol)
    return 0


if __name__ == "__main__":
    sys.exit(main())
