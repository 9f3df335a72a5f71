#!/usr/bin/env bash
# Lint, formatting and type check, as scripts/test.sh runs them before the tests (and as the
# pre-commit hooks do).  Needs the .venv that scripts/test.sh installs (the `test` extra brings
# ruff and pyright; pyright runs on the machine's Node.js).
#   ruff check .           lint rules in pyproject.toml [tool.ruff.lint]
#   ruff format --check .  formatting (`.venv/bin/ruff format .` fixes it)
#   pyright                omnistory_core/ type-checks clean ([tool.pyright] in pyproject.toml)
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/pyright --pythonpath .venv/bin/python
