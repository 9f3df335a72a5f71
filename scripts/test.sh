#!/usr/bin/env bash
# Install everything the test suite needs into .venv and run it.  Used verbatim by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Headless Chromium renders the HTML report in tests (Debian packages; needs root or sudo).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
      || echo "warning: could not install chromium; the HTML screenshot test will fail" >&2
  else
    echo "warning: chromium missing and not root: install the Debian packages chromium and chromium-driver" >&2
  fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first, pinned: this version is a CPU build on our machines (an unpinned torch pulls CUDA)
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]" ./plugins/omnistory-example-planner
.venv/bin/python -m pytest -q "$@"
