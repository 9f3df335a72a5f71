"""The ViStoryBench metrics through ``evaluate`` and the end of a sweep, on the bundled fixture.

Everything runs through the real command line (``omnistory_testkit.run_cli``): the copy_paste
job, then ``evaluate`` on its job directory, on an external outputs tree in both official layouts
and as a dry run, and a sweep with ``evaluation.metrics``.  The models are tiny random
checkpoints built here exactly as the metric tests build them (CSD state dict, SigLIP + head,
Inception v3), loaded by the metrics' own loading code; prompt alignment asks a local
OpenAI-protocol server.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import LocalChatServer, Reply, run_cli
from omnistory_vistorybench.dataset import fixture_root, load_stories
from omnistory_vistorybench.layout import read_outputs

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("openai")

sys.path.insert(0, str(Path(__file__).parent / "metrics"))
from omnistory_vistorybench.metrics.prompt_align import (  # noqa: E402
    RUBRIC_FILES,
    SINGLE_CHARACTER_RUBRIC,
)
from vsb_metric_images import build_tiny_siglip  # noqa: E402

FIXTURE = fixture_root()
#: the fixture's usable shots (story.json indices; 01 shot 6 lacks a field)
FULL = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}
SHOT_IDS = [f"{story}_{i:02d}" for story, ids in FULL.items() for i in ids]
QUIET = ("engine.progress=false",)
#: the score the local judge gives each dimension, recognised by its stand-in rubric
SCORES = {"scene": 4, "camera": 3, "character_action": 2}
RUBRICS = {dim: f"STAND-IN {dim} rubric: rate it 0-4, end with 'Score: N'." for dim in SCORES}
CSD_TINY = dict(image_size=32, patch_size=8, width=32, layers=2, heads=2, embed_dim=16)


# -- tiny checkpoints ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The weights files and folders of csd, aesthetic and diversity, and the rubric folder."""
    from omnistory_vistorybench.metrics._csd_net import CSDStyleNet
    from omnistory_vistorybench.metrics._inception_net import build_inception_v3
    from omnistory_vistorybench.metrics.aesthetic import build_head

    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    torch.save(CSDStyleNet(**CSD_TINY).state_dict(), root / "csd_vit-tiny.pth")
    siglip = build_tiny_siglip(root / "siglip")
    torch.manual_seed(1)
    torch.save(build_head(32).state_dict(), root / "aesthetic_predictor_v2_5.pth")
    torch.manual_seed(0)
    net = build_inception_v3()
    for module in net.modules():  # variance-keeping weights, so that outputs depend on inputs
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        elif isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=0.05)
    torch.save(net.state_dict(), root / "inception_v3_google-0cc3c7bd.pth")
    rubrics = root / "user_prompts"
    rubrics.mkdir()
    for dim, text in RUBRICS.items():
        (rubrics / RUBRIC_FILES[dim]).write_text(text, encoding="utf-8")
    # CIDS's single-character action rubric: its pre-flight needs it once a judge is set
    (rubrics / SINGLE_CHARACTER_RUBRIC).write_text("STAND-IN single rubric", encoding="utf-8")
    return {
        "csd": root / "csd_vit-tiny.pth",
        "siglip": siglip,
        "head": root / "aesthetic_predictor_v2_5.pth",
        "inception": root / "inception_v3_google-0cc3c7bd.pth",
        "rubrics": rubrics,
    }


def settings(models: dict[str, Path], judge_url: str | None = None) -> list[str]:
    """``metric.<name>.<key>=<value>`` settings pointing the metrics at the tiny models."""
    values = {
        **{f"csd.{k}": v for k, v in CSD_TINY.items()},
        "csd.checkpoint": models["csd"],
        "csd.device": "cpu",
        "aesthetic.encoder": models["siglip"],
        "aesthetic.head": models["head"],
        "aesthetic.device": "cpu",
        "diversity.checkpoint": models["inception"],
        "diversity.device": "cpu",
        "diversity.backend": "builtin",
        "prompt_align.rubric_dir": models["rubrics"],
        "prompt_align.max_retries": 0,
    }
    if judge_url is not None:
        values["prompt_align.base_url"] = judge_url
    return [f"metric.{key}={value}" for key, value in values.items()]


def set_flags(models: dict[str, Path], judge_url: str | None = None) -> list[str]:
    return [arg for s in settings(models, judge_url) for arg in ("--set", s)]


# -- helpers ----------------------------------------------------------------------------------
def run(cwd: Path, *args: str, status: int = 0) -> Any:
    done = run_cli(*args, cwd=cwd)
    assert done.returncode == status, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def answer(body: dict[str, Any]) -> Reply:
    rubric = body["messages"][0]["content"][0]["text"]
    dim = next(d for d, text in RUBRICS.items() if text == rubric)
    return Reply(text=f"Analysis: fine.\nScore: {SCORES[dim]}")


def score_lines(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def rows_of(lines: list[dict[str, Any]], evaluator: str) -> list[dict[str, Any]]:
    return [r for r in lines if r["evaluator"] == evaluator]


def components(run_dir: Path) -> dict[str, dict[str, int]]:
    stats = json.loads((run_dir / "evaluation_stats.json").read_text(encoding="utf-8"))
    return stats["components"]


def plan_row(output: str, key: str) -> list[str]:
    """The cells of one component's row of a printed dry-run table."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == key:
            return cells
    raise AssertionError(f"no row {key} in:\n{output}")


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- tests -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_job_is_scored_per_shot_story_and_run_and_a_rerun_makes_no_call(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    run(tmp_path, "task=vistorybench", "dataset=vistory_fixture", "system=copy_paste", *QUIET)
    job = tmp_path / "outputs" / "runs" / "vistory_fixture" / "copy_paste"
    metrics = "csd,aesthetic,diversity,prompt_align"
    with LocalChatServer(answer) as server:
        args = ["evaluate", str(job), "--metrics", metrics, *set_flags(models, server.base_url)]
        run(tmp_path, *args, "--no-report", "--no-progress")
        first, asked, first_stats = score_lines(job), len(server.requests), components(job)
        run(tmp_path, *args, "--no-report", "--no-progress")
        again, asked_again, stats = score_lines(job), len(server.requests), components(job)
        planned = run(tmp_path, *args, "--dry-run").stdout

    # item scope: one prompt_align result per shot, three questions each; no scope field
    align = rows_of(first, "prompt_align")
    assert sorted({r["example_id"] for r in align}) == SHOT_IDS
    assert all("scope" not in r and r["status"] == "ok" for r in align)
    assert {(r["criterion"], r["score"]) for r in align} == {
        (d, float(s)) for d, s in SCORES.items()
    }
    assert asked == 3 * len(SHOT_IDS)
    texts = {b["messages"][0]["content"][1]["text"] for b in server.requests}
    stories = {s.id: s for s in load_stories(FIXTURE)}
    assert stories["01"].shot(4).scene in texts and stories["02"].shot(3).camera in texts
    # group scope: one csd and one aesthetic result per story
    for name, criteria in (("csd", {"self_csd", "cross_csd"}), ("aesthetic", {"aesthetic_score"})):
        rows = rows_of(first, name)
        assert {(r["example_id"], r["criterion"]) for r in rows} == {
            (story, c) for story in FULL for c in criteria
        }
        assert all(r["scope"] == "group" and r["status"] == "ok" for r in rows), rows
    # run scope: one Inception Score for the system, one over its lite stories (a full run)
    diversity = {r["example_id"]: r for r in rows_of(first, "diversity")}
    assert sorted(diversity) == ["", "lite"]
    assert all((r["scope"], r["status"]) == ("run", "ok") for r in diversity.values())
    assert diversity[""]["score"] >= 1.0  # exp(KL) of 9 images: at least 1
    # a run is the system <method>/<mode>/<lang>/<timestamp>
    (system,) = {r["system"] for r in first}
    assert system.startswith("copy_paste/base/en/")
    assert first_stats["metric/csd"]["calls"] == 2 and first_stats["metric/diversity"]["calls"] == 2
    assert first_stats["metric/prompt_align"]["calls"] == len(SHOT_IDS)
    audit = (job / "audit" / "metric-csd.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["scope"] for line in audit] == ["group", "group"]

    # the re-run: every result from the store, no load, no request, the same table
    assert asked_again == asked and again == first
    assert all(c["calls"] == 0 and c["loads"] == 0 for c in stats.values()), stats
    # and the dry run after it finds everything scored
    for key, cached in (("metric/prompt_align", 9), ("metric/csd", 2), ("metric/diversity", 2)):
        assert plan_row(planned, key)[1:3] == ["0", str(cached)]


@pytest.mark.slow
def test_an_external_outputs_tree_in_both_layouts_is_scored(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    outputs = tmp_path / "outputs"
    shutil.copytree(FIXTURE / "outputs", outputs)
    # the layout-B method loses story 02: its story row and shot rows are missing outputs
    shutil.rmtree(outputs / "storyboard" / "ch" / "base" / "20250102_090000" / "02")
    scores = tmp_path / "scores"
    with LocalChatServer(answer) as server:
        run(
            tmp_path,
            "evaluate",
            "--task",
            "vistorybench",
            "--outputs",
            str(outputs),
            "dataset=vistory_fixture",
            str(scores),
            "--metrics",
            "csd,prompt_align",
            *set_flags(models, server.base_url),
            "--no-report",
            "--no-progress",
        )
        bodies = server.requests
    lines = score_lines(scores)
    cp, sb = "copy_paste/base/en/20250101_120000", "storyboard/base/ch/20250102_090000"
    assert {r["system"] for r in lines} == {cp, sb}
    status = {(r["system"], r["example_id"]): r["status"] for r in rows_of(lines, "prompt_align")}
    missing = {k for k, v in status.items() if v == "missing_output"}
    # copy_paste (layout A) has no shot 2 of story 01; storyboard (layout B) no story 02
    assert missing == {(cp, "01_02")} | {(sb, f"02_0{i}") for i in (1, 2, 3)}
    assert all(v == "ok" for k, v in status.items() if k not in missing)
    assert len(bodies) == 3 * (len(status) - len(missing))  # no request for a missing output
    # the ch run is scored against the English shot texts, as officially
    english = {s.id: s for s in load_stories(FIXTURE, language="en")}
    chinese = {s.id: s for s in load_stories(FIXTURE, language="ch")}
    sent = [b["messages"][0]["content"][1]["text"] for b in bodies]
    assert chinese["01"].shot(3).scene not in sent and english["01"].shot(3).scene in sent
    csd = {(r["system"], r["example_id"]): r["status"] for r in rows_of(lines, "csd")}
    assert csd == {
        (cp, "01"): "ok",
        (cp, "02"): "ok",
        (sb, "01"): "ok",
        (sb, "02"): "missing_output",
    }
    assert all(r["scope"] == "group" for r in rows_of(lines, "csd"))
    # story 02 of copy_paste merges its two timestamp subfolders, as the official driver does
    merged = read_outputs(outputs)
    assert sorted(
        next(r for k, r in merged.items() if k.method == "copy_paste").stories["02"].shots
    ) == [1, 2, 3]


@pytest.mark.slow
def test_the_dry_run_counts_judge_requests_and_prices_them(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    prices = "metric.prompt_align.prices={gpt-4.1: {input_per_mtok: 2.0, output_per_mtok: 8.0}}"
    done = run(
        tmp_path,
        "evaluate",
        "--task",
        "vistorybench",
        "--outputs",
        str(FIXTURE / "outputs"),
        "dataset=vistory_fixture",
        str(tmp_path / "scores"),
        "--dry-run",
        "--metrics",
        "prompt_align,cids",
        *set_flags(models, "http://judge.invalid/v1"),
        "--set",
        prices,
        "--set",
        "metric.cids.judge_base_url=http://judge.invalid/v1",
        "--set",
        f"metric.cids.rubric_dir={models['rubrics']}",
    )
    text = one_line(done.stdout)
    runs = read_outputs(FIXTURE / "outputs")
    stories = {
        language: {s.id: s for s in load_stories(FIXTURE, language=language)}
        for language in ("en", "ch")
    }
    with_output = [
        stories[key.language][story_id].shot(index)
        for key, found in runs.items()
        for story_id, outputs in found.stories.items()
        for index in outputs.shots
        if index in FULL[story_id]
    ]
    assert len(with_output) == 17  # 8 of copy_paste (shot 01_02 missing), 9 of storyboard
    row = plan_row(done.stdout, "metric/prompt_align")
    assert row[1:3] == ["17", "0"] and float(row[4]) > 0  # calls, cached, est. USD
    assert f"metric/prompt_align: {3 * 17} judge request(s) in 17 call(s)" in text
    onstage = sum(len(shot.character_keys) for shot in with_output)
    assert plan_row(done.stdout, "metric/cids")[1] == "4"  # one call per story with outputs
    assert f"at most {onstage} single_character_action judge request(s), an upper bound" in text
    assert not (tmp_path / "scores" / "scores.jsonl").exists()  # nothing scored


@pytest.mark.slow
def test_the_end_of_a_sweep_scores_stories_and_runs(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    overrides = ",".join(
        f"'{s}'" for s in settings(models) if s.startswith(("metric.csd", "metric.diversity"))
    )
    sweep = (
        "-m",
        "task=vistorybench",
        "system=copy_paste",
        "dataset=vistory_fixture",
        "evaluation.metrics=[csd,diversity]",
        f"evaluation.overrides=[{overrides}]",
        "evaluation.report=false",
        *QUIET,
    )
    run(tmp_path, *sweep)
    (scores,) = list((tmp_path / "outputs").rglob("scores.jsonl"))
    assert (scores.parent / "sweep_stats.json").is_file()  # the sweep directory's table
    lines = json.loads("[" + ",".join(scores.read_text(encoding="utf-8").splitlines()) + "]")
    assert {(r["evaluator"], r["scope"], r["example_id"], r["status"]) for r in lines} == {
        ("csd", "group", "01", "ok"),
        ("csd", "group", "02", "ok"),
        ("diversity", "run", "", "ok"),
        ("diversity", "run", "lite", "ok"),
    }
    assert len(lines) == 6
    assert {r["system"].rsplit("/", 1)[0] for r in lines} == {"copy_paste/base/en"}

    # the same sweep as a dry run plans the evaluation of the job directories it holds: all
    # scored already (the job itself may be refused: this task's jobs have no dry run yet)
    done = run_cli(*sweep, "engine.dry_run=true", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    plan = json.loads((scores.parent / "sweep_plan.json").read_text(encoding="utf-8"))
    rows = plan["components"]
    assert (rows["metric/csd"]["calls"], rows["metric/csd"]["cached"]) == (0, 2)
    assert (rows["metric/diversity"]["calls"], rows["metric/diversity"]["cached"]) == (0, 2)
    assert rows["metric/csd"]["scope"] == "group" and rows["metric/diversity"]["scope"] == "run"


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    (bad / "method" / "base" / "xx" / "20250101_120000" / "01").mkdir(parents=True)
    base = ("evaluate", "--task", "vistorybench", "--metrics", "csd", "--no-report")
    cases = {
        "is neither official outputs layout": (
            *base,
            "--outputs",
            str(bad),
            "dataset=vistory_fixture",
            str(tmp_path / "s"),
        ),
        "dataset.root=DIR": (*base, "--outputs", str(FIXTURE / "outputs"), str(tmp_path / "s")),
        "--task NAME": ("evaluate", "--outputs", str(FIXTURE / "outputs"), str(tmp_path / "s")),
        "which the item units of task vistorybench do not provide": (
            "evaluate",
            "--task",
            "vistorybench",
            "--outputs",
            str(FIXTURE / "outputs"),
            "dataset=vistory_fixture",
            str(tmp_path / "s"),
            "--metrics",
            "clip",
        ),
    }
    omni = tmp_path / "omni"
    run(omni.parent, "dataset=demo", "dataset.limit=1", f"hydra.run.dir={omni}", *QUIET)
    cases["which the group units of task omnistorybench do not provide"] = (
        "evaluate",
        str(omni),
        "--metrics",
        "csd",
    )
    # a job whose dataset changed since it ran (same folder, another story.json)
    copy = tmp_path / "dataset"
    shutil.copytree(FIXTURE / "ViStory", copy / "ViStory")
    run(tmp_path, "system=copy_paste", "dataset=vistory", f"dataset.root={copy}", *QUIET)
    story = copy / "ViStory" / "02" / "story.json"
    story.write_bytes(story.read_bytes().replace(b"Fable", b"Parable", 1))
    job = tmp_path / "outputs" / "runs" / "vistory" / "copy_paste"
    cases["is not the one this job ran on"] = ("evaluate", str(job), "--metrics", "csd")
    for expected, args in cases.items():
        done = run(tmp_path, *args, status=2)
        errors = [line for line in done.stderr.splitlines() if "error" in line]
        assert len(errors) == 1 and expected in errors[0], done.stderr
    assert not (tmp_path / "s" / "scores.jsonl").exists()


@pytest.mark.slow
def test_the_pre_flight_lists_what_each_metric_needs_before_scoring(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        "evaluate",
        "--task",
        "vistorybench",
        "--outputs",
        str(FIXTURE / "outputs"),
        "dataset=vistory_fixture",
        str(tmp_path / "scores"),
        "--metrics",
        "csd,diversity,prompt_align",
        "--set",
        f"metric.diversity.checkpoint={tmp_path / 'absent.pth'}",
        "--no-report",
        status=2,
    )
    table = one_line(done.stdout + done.stderr)
    for setting in (
        "metric.csd.checkpoint",
        "metric.diversity.checkpoint",
        "metric.prompt_align.rubric_dir",
    ):
        assert setting in table
    assert "not set" in table and "not found" in table  # csd's unset file, diversity's absent one
    assert "nothing was scored" in table and not (tmp_path / "scores" / "scores.jsonl").exists()


def test_every_run_is_the_system_of_its_full_official_run_key() -> None:
    from omnistory_vistorybench.evaluation import run_label
    from omnistory_vistorybench.layout import RunKey

    # the same label whichever runs are scored with it: rows merged over several evaluations
    # stay one run's, and the report averages runs per (method, mode) from these levels
    assert run_label(RunKey("uno", "img_ref", "ch", "20250101_120000")) == (
        "uno/img_ref/ch/20250101_120000"
    )
