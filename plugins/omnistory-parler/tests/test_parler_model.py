"""tts/parler through its own load() on a tiny random checkpoint built by the test (no downloads).

Needs the Parler environment (parler-tts, transformers 4.46.1, torch); skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnistory_core.api import Audio, ComponentError, Failure

pytest.importorskip(
    "parler_tts",
    reason="parler-tts is not installed here; run with the Parler environment"
    " (scripts/test.sh runs these in .venvs/tts; see the plugin README)",
)

from omnistory_parler.expert import ParlerTTS  # noqa: E402

ITEM = {
    "utterance": "Look, a boat!",
    "speaker": "Mina",
    "emotion": "happy",
    "speed": "fast",
    "pitch": "high",
    "gender": "female",
}
MAX_NEW_TOKENS = 10  # ~9 codec frames of 512 samples at 44.1 kHz


def make(model_dir: str, **params) -> ParlerTTS:
    return ParlerTTS(model=model_dir, device="cpu", max_new_tokens=MAX_NEW_TOKENS, **params)


@pytest.fixture(scope="module")
def tts(tiny_parler_dir) -> ParlerTTS:
    component = make(tiny_parler_dir)
    component.load()
    yield component
    component.unload()


@pytest.fixture(scope="module")
def reference(tts) -> Audio:
    """ITEM's audio, generated once (each generation decodes through the ~60M-parameter codec)."""
    return tts.run_one(ITEM)


def test_loads_through_its_own_path_and_speaks(tts, reference):
    out = reference
    assert isinstance(out, Audio), out
    assert out.sample_rate == 44100 == tts.model.config.sampling_rate
    assert out.samples.dtype == np.float32 and out.samples.ndim == 1
    # 2 codebooks with a one-step delay pattern: at most MAX_NEW_TOKENS - 1 frames of 512.
    assert 0 < out.samples.size <= (MAX_NEW_TOKENS - 1) * 512
    assert out.samples.size % 512 == 0
    assert np.isfinite(out.samples).all() and np.abs(out.samples).max() > 0


def test_same_seed_same_audio_in_any_order_and_after_reload(tts, reference, tiny_parler_dir):
    other = {
        **ITEM,
        "utterance": "Where did the little bear go?",
        "speaker": "Old Bear",
        "gender": "male",
        "emotion": "sad",
    }
    first = reference.samples
    # In a batch, after another item: the generator is re-seeded per item.
    batch = tts.run_batch([other, ITEM])
    assert np.array_equal(batch[1].samples, first)
    assert np.array_equal(tts.run_one(other).samples, batch[0].samples)
    fresh = make(tiny_parler_dir)  # a new instance loads lazily on its first call
    assert np.array_equal(fresh.run_one(ITEM).samples, first)


def test_another_seed_gives_other_audio(tiny_parler_dir, tts, reference):
    seeded = make(tiny_parler_dir, seed=1)
    seeded.model, seeded.tokenizer, seeded.device = tts.model, tts.tokenizer, tts.device
    a, b = reference.samples, seeded.run_one(ITEM).samples
    assert a.shape != b.shape or not np.array_equal(a, b)


@pytest.mark.parametrize(
    "change",
    [
        {"emotion": "sad"},
        {"speed": "slow"},
        {"pitch": "low"},
        {"gender": "male"},
        {"utterance": "Come back here, please."},
    ],
)
def test_description_and_text_reach_the_model(tts, reference, change):
    # Every label changes the description (and so the encoder input); the codes must follow.
    assert tts.describe({**ITEM, **change}) != tts.describe(ITEM) or "utterance" in change
    a, b = reference.samples, tts.run_one({**ITEM, **change}).samples
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_bad_items_fail_alone_in_a_batch(tts, reference):
    good = reference.samples
    results = tts.run_batch([{**ITEM, "speed": "warp"}, ITEM, {**ITEM, "utterance": " "}])
    assert isinstance(results[0], Failure) and results[0].category == "plan_invalid_label"
    assert isinstance(results[1], Audio) and np.array_equal(results[1].samples, good)
    assert isinstance(results[2], Failure) and results[2].category == "empty_output"


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def hub_cache_with_two_revisions(model_dir: str, cache: Path) -> None:
    """An offline hub cache of ``org/tiny-parler`` holding the model and its tokenizer at
    ``refs/pr/9`` and only a tokenizer at ``main``; the two tokenizers differ in
    ``model_max_length`` (222 at refs/pr/9, 111 at main)."""
    repo = cache / "models--org--tiny-parler"
    commits = {"main": "a" * 40, "refs/pr/9": "b" * 40}
    for ref, commit in commits.items():
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        names = TOKENIZER_FILES if ref == "main" else os.listdir(model_dir)
        for name in names:
            shutil.copy(Path(model_dir) / name, snapshot / name)
        config = json.loads((snapshot / "tokenizer_config.json").read_text())
        config["model_max_length"] = 111 if ref == "main" else 222
        (snapshot / "tokenizer_config.json").write_text(json.dumps(config))


def test_tokenizer_revision_loads_the_tokenizer_from_its_own_revision(tiny_parler_dir, tmp_path):
    """The official runner's split: the model at refs/pr/9, the tokenizer from the default branch.
    Loaded through load() from an offline hub cache (a fresh process: the cache location is read
    when huggingface_hub is imported)."""
    hub_cache_with_two_revisions(tiny_parler_dir, tmp_path / "cache")
    script = (
        "import json, sys\n"
        "from omnistory_parler.expert import ParlerTTS\n"
        "out = []\n"
        "for params in json.loads(sys.argv[1]):\n"
        "    tts = ParlerTTS(model='org/tiny-parler', device='cpu', **params)\n"
        "    tts.load()\n"
        "    out.append([tts.tokenizer.model_max_length, tts.model.config.sampling_rate])\n"
        "print(json.dumps(out))\n"
    )
    cases = [
        {"revision": "refs/pr/9"},  # tokenizer_revision null: the model's revision
        {"revision": "refs/pr/9", "tokenizer_revision": "main"},
    ]
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the model came from refs/pr/9 both times (main has no weights); the tokenizer followed it,
    # then came from main
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[222, 44100], [111, 44100]]


def test_missing_model_is_a_clear_component_error(tmp_path):
    with pytest.raises(ComponentError, match="cannot load model"):
        make(str(tmp_path / "no-such-checkpoint")).load()
