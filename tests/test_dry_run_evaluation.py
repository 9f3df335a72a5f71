"""``engine.dry_run=true`` with ``evaluation.metrics`` / ``judges``: the end-of-sweep evaluation's
plan, through the real CLI, against what the real evaluation then does (``evaluation_stats.json``).

Evaluators that run offline: judges through the OpenAI-compatible backend against a local
:class:`~omnistory_testkit.FakeServer`, CLIP on a tiny random checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from omnistory_eval.judges import CRITERIA
from omnistory_testing import run_cli
from omnistory_testkit import FakeServer, Reply

QUIET = ("engine.progress=false", "evaluation.report=false", "output_root=out")
GRID = ("planner=template,copy", "image=copy,noop", "tts=espeak,noop")
TEXT, IMAGE, SPEECH = "text-qwen3-30b-a3b", "image-qwen3-vl-32b", "speech-moss-audio-8b"
ROW_KEYS = {"calls", "cached", "loads", "est_cost_usd", "est_gpu_hours"}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def answer(body: dict) -> Reply:
    """A valid answer in the judge's track (told by the criteria its prompt names)."""
    text = json.dumps(body)
    for keys in CRITERIA.values():
        if keys[1] in text:  # the second key is unique to its track
            return Reply(content=json.dumps({k: {"score": 5, "rationale": "ok"} for k in keys}))
    return Reply(content="no track")


def judge_overrides(base_url: str, *judges: str) -> list[str]:
    out = []
    for judge in judges:
        out += [
            f"judge.{judge}.backend=openai",
            f"judge.{judge}.base_url={base_url}",
            f"judge.{judge}.repair=false",
        ]
    return out


def evaluation_args(metrics: list[str], judges: list[str], overrides: list[str]) -> list[str]:
    quoted = ",".join(f"'{o}'" for o in overrides)
    return [
        f"evaluation.metrics=[{','.join(metrics)}]",
        f"evaluation.judges=[{','.join(judges)}]",
        f"evaluation.overrides=[{quoted}]",
    ]


def sweep(tmp_path: Path, *args: str, dry: bool) -> dict | None:
    extra = ("engine.dry_run=true",) if dry else ()
    proc = run_cli(
        "-m", *GRID, "dataset.limit=3", "sweep_name=grid", *QUIET, *extra, *args, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep_dir = tmp_path / "out" / "sweeps" / "grid"
    if not dry:
        return None
    assert "nothing called" in proc.stdout and "judge/" in proc.stdout  # the table
    return load(sweep_dir / "sweep_plan.json")


def distinct_outputs(sweep_dir: Path, modality: str, name: str) -> set[tuple[int, str]]:
    """(example index, content hash) of every output of a modality in the job directories."""
    return {
        (int(path.parent.name), hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sweep_dir.glob(f"*/{modality}/*/{name}")
    }


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from omnistory_testkit.metric_checkpoints import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.mark.slow(seconds=25)
def test_evaluation_plan_matches_the_evaluation_and_a_plan_after_it_is_empty(
    tmp_path: Path, tiny_clip: Path
) -> None:
    sweep_dir = tmp_path / "out" / "sweeps" / "grid"
    with FakeServer(answer) as server:
        overrides = judge_overrides(server.base_url, TEXT, IMAGE, SPEECH)
        overrides += [f"metric.clip.model={tiny_clip}", "metric.clip.device=cpu"]
        evaluation = evaluation_args(["clip"], [TEXT, IMAGE, SPEECH], overrides)

        # part of the work is in the store: 2 examples of one system, and its text judge scores
        first = run_cli(
            "planner=template", "image=noop", "tts=espeak", "dataset.limit=2", *QUIET, cwd=tmp_path
        )
        assert first.returncode == 0, first.stderr[-3000:]
        seed = tmp_path / "out" / "runs" / "demo" / "template-noop-espeak"
        set_args = [a for o in judge_overrides(server.base_url, TEXT) for a in ("--set", o)]
        scored = run_cli(
            "evaluate", str(seed), "--metrics", "", "--judges", TEXT, "--no-report",
            "--no-progress", *set_args, cwd=tmp_path,
        )  # fmt: skip
        assert scored.returncode == 0, scored.stderr[-3000:]
        assert len(server.bodies("chat")) == 2

        # 1. before anything of the grid is generated
        before = sweep(
            tmp_path, *evaluation, "++engine.plan.throughput.judge.text-qwen3-30b-a3b=2", dry=True
        )
        assert before is not None
        assert len(server.bodies("chat")) == 2  # a dry run asks no judge
        assert not (sweep_dir / "evaluation_stats.json").exists()
        assert not list(sweep_dir.glob("*/manifest.json"))
        rows = before["components"]
        evaluators = [f"judge/{TEXT}", f"judge/{IMAGE}", f"judge/{SPEECH}", "metric/clip"]
        assert set(evaluators) <= set(rows)
        assert all(
            ROW_KEYS <= set(rows[k]) and rows[k]["stage"] == "evaluation" for k in evaluators
        )
        assert before["total"]["calls"] == sum(r["calls"] for r in rows.values())
        # 2 planners x 3 examples, 2 of them scored already; copy images are shared by planners
        assert (rows[f"judge/{TEXT}"]["calls"], rows[f"judge/{TEXT}"]["cached"]) == (4, 2)
        assert rows[f"judge/{IMAGE}"]["calls"] == rows["metric/clip"]["calls"] == 3 + 6
        assert all(rows[k]["items"] == 8 * 3 and rows[k]["missing_output"] == 0 for k in evaluators)
        assert rows[f"judge/{TEXT}"]["est_gpu_hours"] == pytest.approx(4 * 2 / 3600, abs=1e-6)
        assert rows["metric/clip"]["est_gpu_hours"] is None  # no throughput known
        assert all(rows[k]["est_cost_usd"] == 0.0 for k in evaluators)  # local models
        # one speech item per distinct TTS call of the plan (the evaluation scores one per
        # distinct audio: see below)
        tts_calls = sum(rows[k]["calls"] + rows[k]["cached"] for k in ("tts/espeak", "tts/noop"))
        assert rows[f"judge/{SPEECH}"]["calls"] == tts_calls == 12
        assert any("an upper bound there" in n for n in before["notes"])
        assert not any("not planned" in n for n in before["notes"])

        # 2. the sweep with its evaluation
        sweep(tmp_path, *evaluation, dry=False)
        stats = load(sweep_dir / "evaluation_stats.json")
        actual = {k: (v["calls"], v["loads"]) for k, v in stats["components"].items()}
        assert set(actual) == set(evaluators)
        for key in (f"judge/{TEXT}", f"judge/{IMAGE}", "metric/clip"):
            assert (rows[key]["calls"], rows[key]["loads"]) == actual[key], key
        # tts=noop's tone depends only on the gender: different TTS calls, identical audio, one
        # evaluator item; the plan before generation could not know it (an upper bound)
        wavs = distinct_outputs(sweep_dir, "speech", "generated.wav")
        assert actual[f"judge/{SPEECH}"] == (len(wavs), 1) and len(wavs) < tts_calls
        assert stats["items"] == {k: rows[k]["items"] for k in evaluators}
        assert len(server.bodies("chat")) == 2 + sum(
            actual[f"judge/{j}"][0] for j in (TEXT, IMAGE, SPEECH)
        )

        # 3. a plan after the run: nothing left to score.  Every output is known now, so every
        # item has its real key, and they are exactly the evaluation's (speech included): a plan
        # made between generation and evaluation counts the evaluation's calls
        again = sweep(tmp_path, *evaluation, dry=True)
        assert again is not None
        for key in evaluators:
            row = again["components"][key]
            assert (row["calls"], row["loads"], row["calls_on_outputs_to_generate"]) == (0, 0, 0)
            assert row["cached"] == actual[key][0] + (2 if key == f"judge/{TEXT}" else 0), key
        assert again["total"]["calls"] == 0


def test_a_single_run_does_not_evaluate_and_its_plan_says_so(tmp_path: Path) -> None:
    args = ("planner=copy", "image=copy", "dataset.limit=2", *QUIET, f"evaluation.judges=[{TEXT}]")
    dry = run_cli(*args, "engine.dry_run=true", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    run_dir = tmp_path / "out" / "runs" / "demo" / "copy-copy-espeak"
    plan = load(run_dir / "sweep_plan.json")
    assert not any(k.startswith(("judge/", "metric/")) for k in plan["components"])
    assert any("a single run does not evaluate" in n for n in plan["notes"])
    # the real single run: generation only, no evaluator call (the judge has no server at all)
    real = run_cli(*args, cwd=tmp_path)
    assert real.returncode == 0, real.stderr[-3000:]
    assert (run_dir / "manifest.json").exists()
    assert not (run_dir / "evaluation_stats.json").exists()
    assert not (run_dir / "scores.jsonl").exists()


@pytest.mark.parametrize(
    ("evaluation", "message"),
    [
        (["evaluation.metrics=[clipp]"], "no metric named 'clipp'"),
        (
            ["evaluation.metrics=[clip]", "evaluation.overrides=['metric.clip.modle=x']"],
            "unknown parameter(s) modle",
        ),
        (
            [
                f"evaluation.judges=[{TEXT}]",
                f"evaluation.overrides=['judge.{TEXT}.backend=openai']",
            ],
            f"config judge.{TEXT}.base_url: the openai backend of the judge needs a server address",
        ),
    ],
)
def test_a_bad_evaluator_stops_the_dry_run_in_one_line(
    tmp_path: Path, evaluation: list[str], message: str
) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    proc = run_cli(
        "-m", "planner=copy", "image=copy", "dataset.limit=1", "engine.dry_run=true", *QUIET,
        *evaluation, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("omnistory: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    sweep_dir = tmp_path / "out" / "sweeps" / "demo"
    assert not (sweep_dir / "sweep_plan.json").exists()
    assert not (tmp_path / "out" / "store").exists()  # nothing generated, nothing scored


def test_hosted_judges_are_priced_without_a_key_or_a_network(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    nowhere = "http://127.0.0.1:9/v1"  # nothing listens: a request would fail
    overrides = []
    for judge in ("text-hosted", "image-hosted", "omni-hosted"):
        overrides += [
            f"judge.{judge}.base_url={nowhere}",
            f"judge.{judge}.model=gpt-5.4",
            f"judge.{judge}.repair=false",
        ]
    overrides.append(
        "judge.image-hosted.prices={gpt-5.4: {input_per_mtok: 1.0, output_per_mtok: 0.0}}"
    )
    proc = run_cli(
        "-m", "planner=copy,template", "image=copy", "dataset.limit=2", "engine.dry_run=true",
        *QUIET, *evaluation_args([], ["text-hosted", "image-hosted", "omni-hosted"], overrides),
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = load(tmp_path / "out" / "sweeps" / "demo" / "sweep_plan.json")
    rows = plan["components"]
    text, image, omni = (rows[f"judge/{j}-hosted"] for j in ("text", "image", "omni"))
    assert text["calls"] == 4 and image["calls"] == 2  # the copy image is one per example
    assert text["est_output_tokens"] == 4 * 1024  # max_new_tokens: the upper bound
    assert text["est_input_tokens"] > 4 * 100
    assert text["est_cost_usd"] > 0 and "OpenAI" in text["price_source"]
    assert image["price_source"] == "judge.image-hosted.prices"
    assert image["est_cost_usd"] == pytest.approx(image["est_input_tokens"] / 1e6)
    assert omni["est_cost_usd"] is None and "audio" in omni["cost_note"]
    assert all(r["est_gpu_hours"] == 0.0 for r in (text, image, omni))  # hosted: no GPU here
    assert plan["total"]["est_cost_usd"] == pytest.approx(
        text["est_cost_usd"] + image["est_cost_usd"]
    )
    assert "judge/omni-hosted" in plan["total"]["unpriced"]
    assert any("OPENAI_API_KEY" in p for p in plan["evaluation_cannot_run_here"])
    assert any("not checked" in n and nowhere in n for n in plan["notes"])


def test_complete_job_directories_of_an_earlier_sweep_are_planned_as_the_evaluation_scores_them(
    tmp_path: Path,
) -> None:
    common = ("dataset.limit=2", "sweep_name=mixed", *QUIET)
    earlier = run_cli("-m", "planner=copy", "image=copy", *common, cwd=tmp_path)
    assert earlier.returncode == 0, earlier.stderr[-3000:]
    sweep_dir = tmp_path / "out" / "sweeps" / "mixed"
    with FakeServer(answer) as server:
        evaluation = evaluation_args([], [TEXT], judge_overrides(server.base_url, TEXT))
        this = ("-m", "planner=template", "image=copy", *common, *evaluation)
        dry = run_cli(*this, "engine.dry_run=true", cwd=tmp_path)
        assert dry.returncode == 0, dry.stderr[-3000:]
        plan = load(sweep_dir / "sweep_plan.json")
        row = plan["components"][f"judge/{TEXT}"]
        # the template narrations still to make, and the copy system's, already generated
        assert (row["items"], row["calls"], row["calls_on_outputs_to_generate"]) == (4, 4, 2)
        assert any("1 of them complete job directories of earlier runs" in n for n in plan["notes"])
        real = run_cli(*this, cwd=tmp_path)
        assert real.returncode == 0, real.stderr[-3000:]
    stats = load(sweep_dir / "evaluation_stats.json")
    assert stats["components"][f"judge/{TEXT}"]["calls"] == row["calls"]
    assert stats["items"][f"judge/{TEXT}"] == row["items"]
