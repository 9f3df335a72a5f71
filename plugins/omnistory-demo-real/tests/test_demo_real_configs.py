"""The suite's light parts, run everywhere: the packaged GGUF's assembly from installed part
packages (drawn here, a few bytes each), the environment override, what ``missing()`` names,
and the presets as Hydra composes them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from omnistory_demo_real import models
from omnistory_demo_real.requirements import missing
from omnistory_testkit import run_cli


def _part_packages(root: Path, dist: str, chunks: list[bytes]) -> None:
    """Installed-looking part packages ``<dist>_part<i>/data/partNN.bin``, as the wheels give."""
    for i, chunk in enumerate(chunks, 1):
        pkg = root / f"{dist}_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)


def test_assembles_installed_parts_in_order(tmp_path: Path, monkeypatch) -> None:
    chunks = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    _part_packages(tmp_path / "site", "omnistory_fake_gguf", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = models.installed_parts("omnistory-fake-gguf", 3)
    assert found is not None and [p.parent.parent.name for p in found] == [
        "omnistory_fake_gguf_part1",
        "omnistory_fake_gguf_part2",
        "omnistory_fake_gguf_part3",
    ]
    whole = b"".join(chunks)
    out = models.assemble_installed(
        found, tmp_path / "cache" / "m.gguf", len(whole), hashlib.sha256(whole).hexdigest()
    )
    assert out.read_bytes() == whole
    assert list(out.parent.iterdir()) == [out]  # no temporary file left


def test_a_wrong_digest_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    _part_packages(tmp_path / "site", "omnistory_bad_gguf", [b"x" * 5, b"y" * 5])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = models.installed_parts("omnistory-bad-gguf", 2)
    assert found is not None
    with pytest.raises(ValueError, match="reinstall"):
        models.assemble_installed(found, tmp_path / "cache" / "m.gguf", 10, "0" * 64)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_part_is_none(tmp_path: Path, monkeypatch) -> None:
    _part_packages(tmp_path / "site", "omnistory_half_gguf", [b"x"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert models.installed_parts("omnistory-half-gguf", 2) is None


def test_the_environment_names_the_model(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(models.ENV_MODEL, str(tmp_path / "my.gguf"))
    assert models.planner_gguf() == tmp_path / "my.gguf"


def test_missing_names_the_clipart_library_and_gguf(monkeypatch) -> None:
    from omnistory_demo_real import requirements

    monkeypatch.delenv(models.ENV_MODEL, raising=False)
    monkeypatch.setattr(requirements, "CLIPART_LIBRARY", Path("/nonexistent/openclipart"))
    gaps = missing()
    assert any("openclipart-png" in g for g in gaps)


def _job_config(tmp_path: Path, *overrides: str) -> dict:
    """The composed job config (``--cfg job``), as YAML."""
    import yaml

    done = run_cli(*overrides, "--cfg", "job", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return yaml.safe_load(done.stdout)


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("llamacpp_clipart_piper", ("llamacpp", "clipart", "piper")),
        ("oracle_oracle_piper", ("oracle", "oracle", "piper")),
        ("noop_noop_noop", ("noop", "noop", "noop")),
    ],
)
def test_presets_compose(tmp_path: Path, preset: str, expected: tuple[str, str, str]) -> None:
    cfg = _job_config(tmp_path, f"system={preset}")
    assert (cfg["planner"]["name"], cfg["image"]["name"], cfg["tts"]["name"]) == expected
    assert cfg["system_id"] == preset


def test_the_llamacpp_preset_takes_its_model_from_the_resolver(tmp_path: Path) -> None:
    cfg = _job_config(tmp_path, "system=llamacpp_clipart_piper")
    assert cfg["planner"]["model"] == "${omnistory_demo_real_gguf:}"


def test_suite_sets_the_stand_ins_and_the_oracle(tmp_path: Path) -> None:
    cfg = _job_config(tmp_path, "suite=demo_real")
    assert cfg["allow_oracle"] is True
    assert cfg["sweep_name"] == "demo_real"
    assert cfg["evaluation"]["metrics"] == [
        "bertscore_minilm",
        "image_sim_effnet",
        "speech_meta_fw_pya",
    ]
