"""The job directory's one writer and one reader (``omnistory_core.jobdir``): a job written by the
real CLI reads back field by field; failures, stale files and hand-made directories read as the
evaluation and the report need them; malformed files and clashing system ids are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testkit import run_cli

from omnistory_core.contract import MODALITIES, Failure
from omnistory_core.data import load_demo
from omnistory_core.jobdir import (
    CANDIDATE_FILES,
    ExampleOutputs,
    JobDir,
    JobDirError,
    MissingOutput,
    candidate_path,
    discover_job_dirs,
    missing_counts,
    read_job_dir,
    write_job_dir,
    write_manifest,
)

SYSTEM = "copy-copy-espeak"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def cli_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("cli")
    proc = run_cli(
        "planner=copy", "dataset.limit=2", "output_root=out", "engine.progress=false", cwd=cwd
    )
    assert proc.returncode == 0, proc.stderr
    return cwd / "out/runs/demo" / SYSTEM


def test_a_cli_job_reads_back_field_by_field(cli_job: Path) -> None:
    examples = load_demo(limit=2)
    indices = [ex.index for ex in examples]
    job = read_job_dir(cli_job)

    assert job.path == cli_job and job.system_id == SYSTEM
    assert job.manifest == json.loads((cli_job / "manifest.json").read_text(encoding="utf-8"))
    assert job.complete and not job.oracle and job.manifest["n_examples"] == 2
    assert job.records == {r["index"]: r for r in _jsonl(cli_job / "records.jsonl")}
    assert list(job.records) == indices
    for i, ex in zip(indices, examples, strict=True):
        assert job.records[i]["example_id"] == ex.id
        for m in MODALITIES:
            assert job.records[i][m] == {"status": "ok", "path": candidate_path(i, m)}
    assert job.plans == {p["index"]: p for p in _jsonl(cli_job / "plans.jsonl")}
    assert list(job.plans) == indices
    assert job.stats == json.loads((cli_job / "stats.json").read_text())
    assert set(job.stats["components"]) == {"planner/copy", "image/copy", "tts/espeak"}
    assert job.stats["missing"] == {m: {} for m in MODALITIES}
    assert job.candidates == {
        i: {m: cli_job / m / str(i) / CANDIDATE_FILES[m] for m in MODALITIES} for i in indices
    }
    assert job.missing == ()
    assert job.indices == {ex.id: ex.index for ex in examples}

    for ex in examples:
        i = job.index_of(ex.id)
        assert i == ex.index
        assert job.candidate(i, "image") == cli_job / f"image/{i}/generated.png"
        narration = job.text(i)
        assert narration == (cli_job / f"text/{i}/generated.txt").read_text(encoding="utf-8")
        plan = job.plan(i)
        assert plan is not None and plan["narration"] == narration == " ".join(
            ex.current.text.split()
        )
    assert job.index_of("no-such-example") is None
    assert job.candidate(99, "text") is None and job.text(99) is None and job.plan(99) is None


def test_discovery_finds_a_run_dir_or_a_job_dir_itself(cli_job: Path, tmp_path: Path) -> None:
    assert discover_job_dirs(cli_job.parent) == [read_job_dir(cli_job)]
    assert discover_job_dirs(cli_job) == [read_job_dir(cli_job)]
    assert discover_job_dirs(tmp_path / "nowhere") == []


def _write(job_dir: Path, blob: Path) -> list[MissingOutput]:
    broken = Failure(
        "model_error", "CUDA out\nof memory", exception="RuntimeError", where="p/m.py:7"
    )
    return write_job_dir(
        job_dir,
        [
            ExampleOutputs(
                index=3,
                example_id="book/3",
                candidates={"text": "Ünïcode narration.", "image": blob, "speech": broken},
                plan={"raw": "{}", "plan": {"narration": "Ünïcode narration."}, "failure": None},
            ),
            ExampleOutputs(
                index=5,
                example_id="book/5",
                candidates={m: Failure("plan_json_error", "bad JSON") for m in MODALITIES},
                plan={"raw": "not json", "plan": None, "failure": {"category": "plan_json_error"}},
            ),
        ],
        {"tts/x": {"calls": 1}, "planner/x": {"calls": 2}},
    )


def test_failures_round_trip_and_the_manifest_completes(tmp_path: Path) -> None:
    blob = tmp_path / "blob.png"
    blob.write_bytes(b"\x89PNG fake")
    job_dir = tmp_path / "job"
    written = _write(job_dir, blob)
    assert missing_counts(written) == {"text": 1, "image": 1, "speech": 2}
    assert [(m.index, m.modality, m.category) for m in written] == [
        (3, "speech", "model_error"),
        (5, "text", "plan_json_error"),
        (5, "image", "plan_json_error"),
        (5, "speech", "plan_json_error"),
    ]
    assert (job_dir / "missing.txt").read_text(encoding="utf-8").splitlines()[0] == (
        "3\tspeech\tmodel_error\tCUDA out of memory (at p/m.py:7)"
    )
    stats = json.loads((job_dir / "stats.json").read_text())
    assert list(stats["components"]) == ["planner/x", "tts/x"]
    assert stats["missing"] == {
        "text": {"plan_json_error": 1},
        "image": {"plan_json_error": 1},
        "speech": {"model_error": 1, "plan_json_error": 1},
    }
    assert discover_job_dirs(tmp_path) == []  # no manifest yet: not a job directory

    write_manifest(job_dir, {"status": "complete", "system_id": "sys", "note": "ü"})
    job = read_job_dir(job_dir)
    assert job.complete and job.system_id == "sys"
    assert job.missing == tuple(written)
    assert job.missing[0].failure.where == "p/m.py:7"
    assert job.candidates == {
        3: {"text": job_dir / "text/3/generated.txt", "image": job_dir / "image/3/generated.png"}
    }
    assert job.text(3) == "Ünïcode narration." and job.text(5) is None
    assert job.candidate(3, "image").read_bytes() == blob.read_bytes()
    assert job.plan(3) == {"narration": "Ünïcode narration."} and job.plan(5) is None
    assert job.indices == {"book/3": 3, "book/5": 5}

    # a rewrite removes the manifest first and the earlier layout with it
    _write(job_dir, blob)
    assert not (job_dir / "manifest.json").exists()


def test_a_failed_record_hides_a_stale_file_and_hand_made_dirs_read(tmp_path: Path) -> None:
    job_dir = tmp_path / "run" / "dir-a"
    (job_dir / "text/0").mkdir(parents=True)
    (job_dir / "text/0/generated.txt").write_text("stale")
    (job_dir / "speech/1").mkdir(parents=True)
    (job_dir / "speech/1/generated.wav").write_bytes(b"RIFF")
    (job_dir / "image/not-an-index").mkdir(parents=True)
    (job_dir / "manifest.json").write_text(json.dumps({"oracle": True}))
    failed = {"status": "failure", "message": "no category"}
    (job_dir / "records.jsonl").write_text(
        json.dumps({"index": 0, "example_id": "e0", "text": failed}) + "\n\n"
    )
    (job_dir / "plans.jsonl").write_text(json.dumps({"index": 1, "example_id": "e1"}) + "\n")
    job = read_job_dir(job_dir)
    assert job.system_id == "dir-a" and job.oracle and not job.complete and job.stats == {}
    assert job.candidates == {1: {"speech": job_dir / "speech/1/generated.wav"}}
    assert job.missing == (MissingOutput(0, "e0", "text", Failure("unspecified", "no category")),)
    assert job.indices == {"e0": 0, "e1": 1}
    assert isinstance(job, JobDir) and discover_job_dirs(tmp_path / "run") == [job]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "records.jsonl",
            '{"index": 0, "example_id": "e"}\n{oops\n',
            r"records.jsonl:2: not valid",
        ),
        ("records.jsonl", "[1]\n", r"records.jsonl:1: expected a JSON object"),
        ("plans.jsonl", '{"index": 0}\n', r"plans.jsonl:1: record lacks field 'example_id'"),
        ("plans.jsonl", '{"index": "0", "example_id": "e"}\n', r"'index' must be an integer"),
        ("stats.json", "[]", r"stats.json: expected a JSON object"),
        ("manifest.json", "{oops", r"manifest.json: not valid JSON"),
        ("manifest.json", '{"system_id": ""}', r"'system_id' must be a non-empty string"),
    ],
)
def test_malformed_files_name_file_line_and_field(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / name).write_text(text)
    with pytest.raises(JobDirError, match=message):
        read_job_dir(tmp_path)


def test_two_directories_claiming_one_system_id_are_refused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_manifest(tmp_path / name, {"system_id": "same"})
    with pytest.raises(JobDirError, match=r"b/manifest.json: system_id 'same' also used by .*a"):
        discover_job_dirs(tmp_path)
