"""Metric sanity with real weights: ``suite=demo_real`` on the first demo transitions, generated
and scored offline end to end by the real models, as a user runs it.

What it checks, per stand-in criterion, on the zero-filled means (a missing output counts 0):

* ``bertscore_minilm/f1`` and ``image_sim_effnet/cosine``: the oracle (the reference narration
  and image) is strictly first and the noop system strictly last.
* ``speech_meta_fw_pya/speed`` and ``/pitch``: the oracle is first and noop last, ties allowed:
  with three examples a criterion takes the values 0, 1/3, 2/3, 1 only, and the real system and
  noop were measured level on both (1/3).
* ``speech_meta_fw_pya/gender``: the oracle is at least the real system; **noop is not asserted
  last**.  The TTS has one male voice (a "female" line is the same voice shifted up), and
  noop's output is a 0.25 s tone on which the SVM's male/female call is arbitrary: measured,
  noop scored 2/3 there, level with the oracle.
* ASR word error rate of faster-whisper (Whisper base) on the Piper-spoken reference utterances
  (the oracle system's speech; the transcripts are the metric's own, from its audit file):
  printed and bounded.  Measured 0.29 (6 errors over 21 words): the first is spoken at the "high"
  pitch (+13 semitones), which Whisper mishears; the other two are transcribed (nearly) exactly.
* The real planner's plan validity rate (plans without a recorded failure): printed, > 0
  (measured 3/3 with the llama.cpp backend and its schema grammar; the transformers backend,
  without a grammar, gave 0/3, so the test needs llama-cpp-python and says so when it is absent).

Measured on the 2-core machine, loaded (load average about 7): the sweep 3 min 0 s; this test 3 min
33 s (pytest -n0, 5 passed).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from omnistory_demo_real.requirements import missing_line
from omnistory_testkit import run_cli

LIMIT = 3
#: measured 0.29 (6 errors over 21 words); the bound leaves room for the transformers backend
WER_BOUND = 0.6

GAPS = missing_line()
#: the grammar is what makes the 0.5B model's plans valid: measured on these three examples, the
#: transformers backend (no grammar) gave 0/3 valid plans (emotions 'urgent', 'scared and
#: uneasy', 'anger'), so the real system made nothing and the sweep exited non-zero
NO_GRAMMAR = (
    "planner=llamacpp needs llama-cpp-python==0.3.36 here (its schema grammar): the transformers"
    " backend gave 0/3 valid plans on these examples; pip install './plugins/omnistory-demo-real"
    "[real,llama-cpp]' (builds the wheel once) or a wheel built before"
)
if GAPS is None and importlib.util.find_spec("llama_cpp") is None:
    GAPS = NO_GRAMMAR
NEEDS_REAL = pytest.mark.skipif(GAPS is not None, reason=GAPS or "")

ORACLE = "oracle_oracle_piper"
SYSTEM = "llamacpp_clipart_piper"
NOOP = "noop_noop_noop"


def words(text: str) -> list[str]:
    """Lower-case words without punctuation (the WER's tokens)."""
    return re.findall(r"[a-z0-9']+", text.lower())


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions, insertions, deletions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def test_edit_distance() -> None:
    assert edit_distance(words("The moon, fell!"), words("the men fell")) == 1
    assert edit_distance(words("a b c"), []) == 3
    assert edit_distance([], words("a")) == 1


def run_sweep(root: Path) -> Path:
    """``suite=demo_real`` as a user runs it, offline; returns the sweep folder."""
    proc = run_cli(
        "-m",
        "suite=demo_real",
        f"dataset.limit={LIMIT}",
        f"output_root={root}",
        cwd=root,
        env={"HF_HUB_OFFLINE": "1"},
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = root / "sweeps" / "demo_real"
    assert (out / "report" / "index.html").is_file()
    assert "Stand-in metrics with real weights" in proc.stdout + proc.stderr
    return out


def zero_filled(sweep: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(evaluator, criterion) -> system -> zero-filled mean, from the sweep's scores.jsonl."""
    sums: dict[tuple[str, str], dict[str, list[float]]] = {}
    for line in (sweep / "scores.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] != "metric" or row["status"] == "error":
            continue
        cell = sums.setdefault((row["evaluator"], row["criterion"]), {})
        cell.setdefault(row["system"], []).append(
            float(row["score"]) if row["status"] == "ok" else 0.0
        )
    return {k: {s: sum(v) / len(v) for s, v in cell.items()} for k, cell in sums.items()}


def check_real_metrics_score_ok(sweep: Path) -> None:
    rows = [json.loads(x) for x in (sweep / "scores.jsonl").read_text().splitlines()]
    for evaluator in ("bertscore_minilm", "image_sim_effnet", "speech_meta_fw_pya"):
        mine = [r for r in rows if r["evaluator"] == evaluator]
        assert {r["system"] for r in mine} == {ORACLE, SYSTEM, NOOP}, evaluator
        assert all(r["status"] == "ok" for r in mine if r["system"] != NOOP), evaluator
    assert (sweep / "report" / "stand_in_leaderboard.csv").is_file()


def check_oracle_first_noop_last(sweep: Path) -> None:
    means = zero_filled(sweep)
    print({f"{e}/{c}": v for (e, c), v in sorted(means.items())})
    for key in (("bertscore_minilm", "f1"), ("image_sim_effnet", "cosine")):
        m = means[key]
        assert m[ORACLE] > m[SYSTEM] > m[NOOP], (key, m)
    for criterion in ("speed", "pitch"):
        m = means[("speech_meta_fw_pya", criterion)]
        assert m[ORACLE] >= max(m[SYSTEM], m[NOOP]), (criterion, m)
        assert m[NOOP] <= min(m[ORACLE], m[SYSTEM]), (criterion, m)
    # gender: noop's 0.25 s tone is classified arbitrarily and one male voice speaks every line
    m = means[("speech_meta_fw_pya", "gender")]
    assert m[ORACLE] >= m[SYSTEM], m


def check_asr_word_error_rate_on_piper(sweep: Path) -> None:
    """The metric's own faster-whisper transcripts of the oracle's Piper-spoken reference lines
    against those lines (the plan the oracle gave Piper)."""
    plans = {}
    for line in (sweep / ORACLE / "plans.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        plans[rec["example_id"]] = rec["plan"]["speech"]["utterance"]
    errors = total = 0
    audit = sweep / "audit" / "metric-speech_meta_fw_pya.jsonl"
    for line in audit.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["system"] != ORACLE:
            continue
        ref = words(plans[rec["example_id"]])
        hyp = words(rec["detail"]["transcript"]["text"])
        errors += edit_distance(ref, hyp)
        total += len(ref)
    assert total > 0
    wer = errors / total
    print(f"ASR WER on {len(plans)} Piper-spoken reference lines: {wer:.3f} ({errors}/{total})")
    assert wer < WER_BOUND


def check_plan_validity_rate(sweep: Path) -> None:
    recs = [
        json.loads(x)
        for x in (sweep / SYSTEM / "plans.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    valid = sum(1 for r in recs if r.get("failure") is None)
    rate = valid / len(recs)
    print(f"plan validity rate of planner=llamacpp: {rate:.2f} ({valid}/{len(recs)})")
    assert len(recs) == LIMIT
    assert rate > 0


@pytest.mark.weights
@pytest.mark.slow
@NEEDS_REAL
def test_demo_real_sanity(tmp_path: Path) -> None:
    """One test runs the sweep and checks everything on it (a module fixture would run the
    sweep once per pytest-xdist worker that gets one of several tests)."""
    sweep = run_sweep(tmp_path)
    check_real_metrics_score_ok(sweep)
    check_oracle_first_noop_last(sweep)
    check_asr_word_error_rate_on_piper(sweep)
    check_plan_validity_rate(sweep)
