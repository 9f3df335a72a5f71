"""Metric throughput on CPU with tiny stand-in checkpoints: items scored per second per metric.

Builds the tiny random checkpoints of ``omnistory_testkit.metric_checkpoints`` (no download),
loads each metric once, and times ``run_batch`` over synthetic items (distinct narrations, distinct
random images, synthetic voiced clips of 1-4 s).  Model time is tiny here, so the numbers measure
the framework and the model-independent work (tokenization, image preprocessing, audio decoding,
pyin F0 tracking, windowing); real checkpoints are orders of magnitude slower per item.
Also prints the pure speech rules alone (load + trim + pyin) per second of audio.

    python benchmarks/metrics_throughput.py [--items 33] [--repeats 3]
        [--metrics bertscore,clip,speech_meta]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def text_items(n: int) -> list[dict[str, Any]]:
    words = "the little fox ran to the river and saw a boat while the bird sang a song".split()
    out = []
    for i in range(n):
        cand = " ".join(words[(i + k) % len(words)] for k in range(8 + i % 7))
        ref = " ".join(words[(3 * i + k) % len(words)] for k in range(10 + i % 5))
        out.append({"candidate_text": cand.capitalize() + ".", "reference_text": ref + "."})
    return out


def image_items(n: int, root: Path) -> list[dict[str, Any]]:
    import hashlib

    import numpy as np
    from PIL import Image

    from omnistory_core.components import Media

    rng = np.random.default_rng(0)

    def image(name: str) -> Media:
        path = root / f"{name}.png"
        Image.fromarray((rng.random((256, 256, 3)) * 255).astype("uint8")).save(path)
        return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())

    golds = [image(f"gold{i}") for i in range(max(1, n // 4))]  # gold images shared, as in a sweep
    return [
        {"candidate_image": image(f"cand{i}"), "reference_image": golds[i % len(golds)]}
        for i in range(n)
    ]


def speech_items(n: int, root: Path) -> tuple[list[dict[str, Any]], float]:
    from omnistory_testkit.metric_checkpoints import synthetic_voice, write_wav

    from omnistory_core.components import Media

    items, seconds = [], 0.0
    for i in range(n):
        dur = 1.0 + (i % 4)
        wave = synthetic_voice(100.0 + 13 * i, dur, syllables_per_second=3.0, seed=i)
        path = write_wav(root / f"speech{i}.wav", wave)
        seconds += dur
        ref = {
            "utterance": "x",
            "speaker": "y",
            "emotion": "happy",
            "speed": "normal",
            "pitch": "normal",
            "gender": "female" if i % 2 else "male",
        }
        items.append({"candidate_speech": Media(str(path), f"s{i}"), "reference_speech": ref})
    return items, seconds


def time_metric(
    metric: Any, items: list[dict[str, Any]], warmup: dict[str, Any], repeats: int
) -> list[float]:
    rates = []
    for _ in range(repeats):
        fresh = type(metric)(**metric.params)  # no embedding cache carried between repeats
        fresh.load()
        fresh.run_batch([warmup])  # first-call allocations; not one of the timed items
        t0 = time.perf_counter()
        for start in range(0, len(items), fresh.batch_size):
            fresh.run_batch(items[start : start + fresh.batch_size])
        rates.append(len(items) / (time.perf_counter() - t0))
        fresh.unload()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=33)  # one of them is the warm-up item
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--metrics", default="bertscore,clip,speech_meta")
    args = parser.parse_args()

    import torch
    from omnistory_eval import speech_analysis as sm
    from omnistory_eval.metrics import BERTScoreMetric, CLIPMetric, SpeechMetaMetric
    from omnistory_testkit import metric_checkpoints as tiny

    wanted = {m.strip() for m in args.metrics.split(",") if m.strip()}
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.items} items, "
        f"median of {args.repeats} repeats (load time excluded)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = tiny.build_all(root / "models")
        runs: list[tuple[str, Any, list[dict[str, Any]]]] = []
        if "bertscore" in wanted:
            runs.append(
                (
                    "bertscore",
                    BERTScoreMetric(model_type=str(models["roberta"]), num_layers=2, device="cpu"),
                    text_items(args.items),
                )
            )
        if "clip" in wanted:
            runs.append(
                (
                    "clip",
                    CLIPMetric(model=str(models["clip"]), device="cpu"),
                    image_items(args.items, root),
                )
            )
        speech_seconds = 0.0
        if "speech_meta" in wanted:
            items, speech_seconds = speech_items(args.items, root)
            runs.append(
                ("speech_meta", SpeechMetaMetric(**tiny.tiny_speech_meta_params(models)), items)
            )
        for name, metric, items in runs:
            warmup, timed = items[0], items[1:]
            time_metric(metric, timed[:2], warmup, 1)  # process warm-up (numba JIT, torch)
            rates = time_metric(metric, timed, warmup, args.repeats)
            print(
                f"{name:<12} {statistics.median(rates):8.1f} items/s   "
                f"(min {min(rates):.1f}, max {max(rates):.1f}; batch_size {metric.batch_size})"
            )
        if speech_seconds:
            speech_breakdown(runs[-1][1], runs[-1][2], speech_seconds, sm)


def speech_breakdown(metric: Any, items: list[dict[str, Any]], seconds: float, sm: Any) -> None:
    """Seconds per clip of each speech_meta stage, run separately on the same clips."""
    metric.load()
    t0 = time.perf_counter()
    audio = [sm.load_speech(i["candidate_speech"].path) for i in items]
    stages = {"load+trim": time.perf_counter() - t0}
    full = [a[0] for a in audio]
    trimmed = [a[1] for a in audio]
    for name, call in [
        ("whisper", lambda: metric._asr.transcribe(full)),
        ("gender", lambda: metric._gender.predict(trimmed)),
        ("emotion", lambda: metric._emotion.predict(trimmed)),
        ("pyin/yin", lambda: [sm.estimate_f0(w, sm.SAMPLE_RATE) for w in trimmed]),
    ]:
        t0 = time.perf_counter()
        call()
        stages[name] = time.perf_counter() - t0
    metric.unload()
    n = len(items)
    print(
        f"speech_meta stages, ms per clip (mean clip {seconds / n:.1f} s): "
        + ", ".join(f"{k} {1000 * v / n:.1f}" for k, v in stages.items())
    )
    rules = stages["load+trim"] + stages["pyin/yin"]
    print(f"speech rules alone (load, trim, pyin): {seconds / rules:.1f} s of audio per s")


if __name__ == "__main__":
    main()
