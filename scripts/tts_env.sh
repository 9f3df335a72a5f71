#!/usr/bin/env bash
# Build .venvs/tts, the isolated environment of the Parler-TTS and VoxCPM experts (parler-tts pins
# transformers 4.46.1; both need torch 2.9.1 with torchaudio), once: the file .venvs/tts/.complete
# marks a finished `env create`, so a build killed halfway is started again from scratch.  The
# test extras are installed on every call: the local omnistory-eval and omnistory-testkit are
# copies, not editable installs, and must follow the working tree.  Needs .venv (scripts/test.sh
# starts this in the background once the core is installed there).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -f .venvs/tts/.complete ]; then
  rm -rf .venvs/tts
  .venv/bin/python -m omnistory_core env create tts=parler tts=voxcpm --dir .venvs/tts --no-compile
  touch .venvs/tts/.complete
fi
# with an argument, the installs below wait for that file: scripts/test.sh starts this script
# while it installs the main environment, and touches the file when that is done (the two pip
# runs would otherwise build the same local plugins in their source folders at once)
if [ $# -gt 0 ]; then
  until [ -f "$1" ]; do sleep 1; done
fi
# the emotion members of metric=speech_meta run as workers in this environment: they import
# omnistory_eval, and the test builds their tiny checkpoints with the test kit.  torchvision
# 0.24.1 is the build of this environment's torch 2.9.1 (the main .venv's CPU torch has none
# that imports): ViStoryBench's checks against torchvision run here (scripts/test.sh)
.venvs/tts/bin/python -m pip install -q --no-compile pytest "speechbrain==1.1.2" "ruamel.yaml<0.19" \
  "torch==2.9.1" "torchvision==0.24.1" ./plugins/omnistory-eval ./plugins/omnistory-testkit
