"""resolve_root(): local paths, and clear failures when the Hub cannot be used (never online)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from omnistory_core.data import DatasetError, load_dataset, resolve_root
from omnistory_core.data.schema import PARQUET_RELATIVE_PATH


def test_existing_root_is_used(release):
    assert resolve_root(release) == release.resolve()
    assert resolve_root(str(release), download=False) == release.resolve()
    assert resolve_root(release / PARQUET_RELATIVE_PATH) == release.resolve()


def test_file_that_is_not_a_root(release):
    with pytest.raises(DatasetError, match="is not a directory"):
        resolve_root(release / "README.md")


def test_no_download_allowed(tmp_path):
    for root in (None, tmp_path / "missing"):
        with pytest.raises(DatasetError) as info:
            resolve_root(root, download=False)
        message = str(info.value)
        assert "downloading is disabled" in message
        assert "dataset.root=PATH" in message and "omnistory-core[hub]" in message


def test_load_dataset_official_from_a_local_root(release):
    examples = load_dataset(
        {"name": "omnistorybench", "root": str(release), "limit": 2, "download": False}
    )
    assert [e.index for e in examples] == [0, 1]
    with pytest.raises(DatasetError, match="download must be true or false"):
        load_dataset({"name": "omnistorybench", "root": None, "download": "yes"})


def run_python(code: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    clean.update(HF_HOME=str(tmp_path / "hf-home"), **env)
    return subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=120
    )


RESOLVE = (
    "import sys\n"
    "from omnistory_core.data import DatasetError, resolve_root\n"
    "try:\n"
    "    resolve_root(sys.argv[1] if len(sys.argv) > 1 else None)\n"
    "except DatasetError as exc:\n"
    "    print(exc)\n"
    "    raise SystemExit(3)\n"
)


def test_offline_hub_fails_fast_with_advice(tmp_path):
    """HF_HUB_OFFLINE=1 and an empty cache: no network is touched, the error says what to do."""
    result = run_python(RESOLVE, tmp_path, HF_HUB_OFFLINE="1")
    assert result.returncode == 3, result.stderr
    assert "no dataset root was given" in result.stdout
    assert "snu-aidas/Omni-StoryBench" in result.stdout
    assert "dataset.root=PATH" in result.stdout and "omnistory-core[hub]" in result.stdout


def test_offline_hub_with_a_missing_root(tmp_path):
    code = RESOLVE.replace("sys.argv[1] if len(sys.argv) > 1 else None", repr(str(tmp_path / "x")))
    result = run_python(code, tmp_path, HF_HUB_OFFLINE="1")
    assert result.returncode == 3, result.stderr
    assert f"dataset root {tmp_path / 'x'} does not exist" in result.stdout
    assert not (tmp_path / "x").exists()


def test_without_huggingface_hub_installed(tmp_path):
    # A None entry in sys.modules makes the import fail exactly as if the package were absent.
    code = "import sys\nsys.modules['huggingface_hub'] = None\n" + RESOLVE
    result = run_python(code, tmp_path)
    assert result.returncode == 3, result.stderr
    assert "huggingface_hub is not installed" in result.stdout
    assert "omnistory-core[hub]" in result.stdout
