"""Metric sanity with real weights: ``suite=demo_real`` on the first demo transitions, generated
and scored offline end to end by the real models, as a user runs it.

What it checks, per stand-in criterion, on the zero-filled means (a missing output counts 0):

* ``bertscore_minilm/f1`` and ``image_sim_effnet/cosine``: the oracle (the reference narration
  and image) is strictly first and the noop system strictly last.
* ``speech_meta_fw_pya/speed``, ``/pitch`` and ``/gender``: the oracle is first and noop last,
  ties allowed: with three examples a criterion takes the values 0, 1/3, 2/3, 1 only, and the
  real system's planner can miss every label.  noop speaks a 0.25 s tone, in which the
  voice-activity model finds no speech, so the metric judges none of its fields
  (``require_speech``): noop is 0 on every speech field.  Before that rule its tone scored 1/3 on
  pitch and 2/3 on gender by chance, above the real system; asking the ASR instead ("did Whisper
  hear a word?") held on one CPU and not on another, because Whisper's hallucinations on a tone
  depend on the instruction set.
* The same speech claims under every instruction set CTranslate2 and OpenBLAS can be forced to
  here: the sweep's speech is scored again, into a store of its own, with
  ``CT2_FORCE_CPU_ISA`` = GENERIC, AVX, AVX2 (and AVX512 where the CPU has it), each with an
  ``OPENBLAS_CORETYPE`` of the same generation; every clip's speech decision equals the native
  run's.
* ASR word error rate of faster-whisper (Whisper base) on the Piper-spoken reference utterances
  (the oracle system's speech; the transcripts are the metric's own, from its audit file):
  printed and bounded.  Measured 0.29 (6 errors over 21 words): the first is spoken at the "high"
  pitch (+13 semitones), which Whisper mishears; the other two are transcribed (nearly) exactly.
* The real planner's plan validity rate (plans without a recorded failure): printed; with the
  Plan grammar every plan not cut by the token limit is valid, so valid + truncated = all (measured
  3/3 with either backend's grammar; without a grammar the transformers backend gave 0/3).

Where the test command installed everything (``OMNISTORY_REQUIRE_REAL=1``, set by
``scripts/test.sh``) a missing piece fails the test instead of skipping it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from omnistory_demo_real.requirements import missing_line
from omnistory_testkit import run_cli

LIMIT = 3
#: measured 0.29 (6 errors over 21 words); the bound leaves room for the transformers backend
WER_BOUND = 0.6

GAPS = missing_line()
#: set by scripts/test.sh, which installs everything: a gap is then a failure, not a skip
REQUIRED = os.environ.get("OMNISTORY_REQUIRE_REAL") == "1"
NEEDS_REAL = pytest.mark.skipif(GAPS is not None and not REQUIRED, reason=GAPS or "")

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
    check_speech_order(means, "native")


def check_speech_order(means: dict[tuple[str, str], dict[str, float]], where: object) -> None:
    """Oracle first and noop last on each speech field (ties allowed, see the module
    docstring); noop's tone is never judged, so it is 0 on every field."""
    for criterion in ("speed", "pitch", "gender"):
        m = means[("speech_meta_fw_pya", criterion)]
        assert m[ORACLE] >= max(m[SYSTEM], m[NOOP]), (where, criterion, m)
        assert m[NOOP] <= min(m[ORACLE], m[SYSTEM]), (where, criterion, m)
        assert m[NOOP] == 0.0, (where, criterion, m)  # a tone is not judged


def forced_isas() -> list[dict[str, str]]:
    """CTranslate2's forced instruction sets with an OpenBLAS core type of the same generation;
    AVX512 only where this CPU has it (forcing an ISA the CPU lacks would crash, not test)."""
    variants = [
        {"CT2_FORCE_CPU_ISA": "GENERIC", "OPENBLAS_CORETYPE": "Prescott"},
        {"CT2_FORCE_CPU_ISA": "AVX", "OPENBLAS_CORETYPE": "Sandybridge"},
        {"CT2_FORCE_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
    ]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file() and " avx512f" in cpuinfo.read_text(encoding="utf-8"):
        variants.append({"CT2_FORCE_CPU_ISA": "AVX512", "OPENBLAS_CORETYPE": "SkylakeX"})
    return variants


def speech_decisions(sweep: Path) -> dict[tuple[str, str], bool]:
    """(system, example id) -> whether the metric found speech in the clip."""
    out = {}
    audit = sweep / "audit" / "metric-speech_meta_fw_pya.jsonl"
    for line in audit.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        presence = (rec.get("detail") or {}).get("speech_presence")
        if presence is not None:
            out[(rec["system"], rec["example_id"])] = bool(presence["speech"])
    return out


def rescore_speech(sweep: Path, root: Path, env: dict[str, str]) -> Path:
    """The sweep's generated speech scored again by ``speech_meta_fw_pya`` into a store of its
    own (nothing cached is reused) under ``env``; returns the copy that holds the scores."""
    name = env["CT2_FORCE_CPU_ISA"].lower()
    copy = root / f"isa-{name}"
    shutil.copytree(
        sweep, copy, ignore=shutil.ignore_patterns("report", "scores.jsonl", "audit", ".pool")
    )
    proc = run_cli(
        "evaluate",
        str(copy),
        "--metrics",
        "speech_meta_fw_pya",
        "--store",
        str(root / f"store-{name}"),
        "--no-report",
        "--no-progress",
        cwd=root,
        env={"HF_HUB_OFFLINE": "1", **env},
        timeout=900,
    )
    assert proc.returncode == 0, (env, proc.stdout[-2000:] + proc.stderr[-2000:])
    return copy


def check_speech_claims_under_every_isa(sweep: Path, root: Path) -> None:
    native = speech_decisions(sweep)
    assert native and not any(v for (s, _), v in native.items() if s == NOOP), native
    assert all(v for (s, _), v in native.items() if s != NOOP), native
    for env in forced_isas():
        copy = rescore_speech(sweep, root, env)
        assert speech_decisions(copy) == native, env
        means = zero_filled(copy)
        print(env["CT2_FORCE_CPU_ISA"], {c: v for (_, c), v in sorted(means.items())})
        check_speech_order(means, env)


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
    truncated = sum(int((r.get("usage") or {}).get("truncated_calls") or 0) for r in recs)
    grammar = sum(int((r.get("usage") or {}).get("grammar_calls") or 0) for r in recs)
    print(
        f"plan validity rate of planner=llamacpp: {rate:.2f} ({valid}/{len(recs)});"
        f" {grammar} call(s) under the Plan grammar, {truncated} cut by the token limit"
    )
    assert len(recs) == LIMIT
    assert grammar == LIMIT  # every call ran under the Plan grammar
    assert valid + truncated == LIMIT  # the grammar leaves no other way to fail


@pytest.mark.weights
@pytest.mark.slow(seconds=240)
@NEEDS_REAL
def test_demo_real_sanity(tmp_path: Path) -> None:
    """One test runs the sweep and checks everything on it (a module fixture would run the
    sweep once per pytest-xdist worker that gets one of several tests)."""
    assert GAPS is None, f"OMNISTORY_REQUIRE_REAL=1 but {GAPS}"
    sweep = run_sweep(tmp_path)
    check_real_metrics_score_ok(sweep)
    check_oracle_first_noop_last(sweep)
    check_asr_word_error_rate_on_piper(sweep)
    check_plan_validity_rate(sweep)
    check_speech_claims_under_every_isa(sweep, tmp_path)
