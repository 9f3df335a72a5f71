"""AnyGPT passes the plugin kit's conformance run on the stand-in checkout and its tiny
checkpoints, loaded through the backbone's own load()."""

from __future__ import annotations

from omnistory_anygpt.backbone import AnyGPT
from omnistory_testkit import check_component


def test_anygpt_keeps_the_component_contract(standin, chat_models) -> None:
    report = check_component(
        AnyGPT,
        source_dir=str(standin["source_dir"]),
        model=str(chat_models()),
        image_tokenizer=str(standin["image_tokenizer"]),
        image_decoder=str(standin["image_decoder"]),
        speech_modules=str(standin["speech_modules"]),
        dtype="float32",
        device="cpu",
        vary={"dtype": "bfloat16"},
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert "runtime_params (device)" in report.passed, str(report)
    assert any(p.startswith("output_params (") and "dtype" in p for p in report.passed)
    assert "failures (through run_one)" in report.passed, str(report)
