"""The prefetch command lists what a configuration needs and says clearly when it cannot fetch."""

from __future__ import annotations

from pathlib import Path

from omnistory_testing import run_cli

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def test_dry_run_lists_checkpoints_of_components_metrics_and_judges(tmp_path: Path) -> None:
    proc = run_cli(
        "prefetch",
        "image=dev",
        "tts=parler",
        "--metrics",
        "bertscore,speech_meta",
        "--judges",
        "panel_a",
        "--dry-run",
        cwd=tmp_path,
        env=OFFLINE,
    )
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0]: line for line in proc.stdout.splitlines()}
    for checkpoint in (
        "black-forest-labs/FLUX.1-dev",
        "parler-tts/parler-tts-large-v1",
        "roberta-large",
        "openai/whisper-large-v3",
        "audeering/wav2vec2-large-robust-24-ft-age-gender",
        "Qwen/Qwen3-VL-32B-Instruct",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
    ):
        assert checkpoint in listed, checkpoint
    assert "size unknown" in listed["roberta-large"]  # offline: said, not invented


def test_local_checkpoint_needs_nothing(tmp_path: Path) -> None:
    local = tmp_path / "my-flux"
    local.mkdir()
    proc = run_cli(
        "prefetch",
        "image=dev",
        "--dry-run",
        cwd=tmp_path,
        env={**OFFLINE, "OMNISTORY_MODEL_IMAGE_DEV": str(local)},
    )
    assert proc.returncode == 0 and proc.stdout.strip() == ""


def test_offline_download_fails_with_a_clear_message(tmp_path: Path) -> None:
    proc = run_cli("prefetch", "--metrics", "clip", cwd=tmp_path, env=OFFLINE)
    assert proc.returncode == 1
    assert "could not download openai/clip-vit-base-patch32" in proc.stderr
    assert "1 of 1 checkpoints could not be downloaded" in proc.stderr


def test_checkpoints_are_what_load_reads_plus_a_judges_repair_model(tmp_path: Path) -> None:
    """hub.load_checkpoints names what ``load()`` reads; prefetch adds a judge's repair model."""
    from omnistory_eval import prefetch
    from omnistory_eval.judges import REPAIR_SPEC

    from omnistory_core.kit import hub

    class Spec:
        checkpoint = "org/judge"

    class Judge:
        spec = Spec()

    class Declares:
        @classmethod
        def checkpoints(cls, params: dict) -> list[str]:
            return ["org/a", "org/a", str(params["local"])]

    local = tmp_path / "weights"
    local.mkdir()
    repair = {"repair": {"checkpoint": "org/repair"}}
    assert hub.load_checkpoints(Judge, repair) == ["org/judge"]
    assert prefetch.component_checkpoints("judge", Judge, repair) == ["org/judge", "org/repair"]
    # the key RepairModel loads from, not the served name an openai-backend repairer talks to
    served = {"repair": {"backend": "openai", "model": "served-name", "checkpoint": "org/x"}}
    assert prefetch.component_checkpoints("judge", Judge, served) == ["org/judge"]
    assert prefetch.component_checkpoints("judge", Judge, {"repair": True}) == [
        "org/judge",
        REPAIR_SPEC.checkpoint,
    ]
    assert prefetch.component_checkpoints("metric", Judge, {"repair": True}) == ["org/judge"]
    assert hub.load_checkpoints(Declares, {"local": local}) == ["org/a"]
    assert prefetch.component_checkpoints(
        "image", object, {"model": str(local), "text_encoder": "org/te"}
    ) == ["org/te"]


def test_a_judges_checkpoint_override_is_fetched_and_a_served_judge_needs_nothing() -> None:
    from omnistory_eval import prefetch
    from omnistory_eval.judges.judge import Qwen3TextJudge

    from omnistory_core.kit import hub

    default = Qwen3TextJudge.spec.checkpoint
    assert hub.load_checkpoints(Qwen3TextJudge, {}) == [default]
    assert hub.load_checkpoints(Qwen3TextJudge, {"checkpoint": "org/finetuned"}) == [
        "org/finetuned"
    ]
    # a judge behind an OpenAI-compatible server: `model` is the served name, nothing to fetch
    served = {"backend": "openai", "model": "qwen3", "base_url": "http://127.0.0.1:9/v1"}
    assert prefetch.component_checkpoints("judge", Qwen3TextJudge, served) == []
