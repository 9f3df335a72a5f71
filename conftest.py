"""Settings for every test session of this repository (tests/ and plugins/*/tests)."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    # the tests' CLI runs fork from an interpreter that has already imported the CLI
    # (omnistory_testkit.forkserver: a third of the CPU of a short run);
    # OMNISTORY_TESTKIT_FORK=0 starts a new interpreter for each
    os.environ.setdefault("OMNISTORY_TESTKIT_FORK", "1")
    # librosa's numba functions are compiled with cache=True into one shared cache directory;
    # two pytest-xdist workers writing it at once can crash a worker, so each session and each
    # worker (with the subprocesses its tests start) gets its own; a worker inherits the
    # controller's environment, so it always replaces the directory
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker or "NUMBA_CACHE_DIR" not in os.environ:
        prefix = f"omnistory-numba-{worker or 'main'}-"
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix=prefix)


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ARG001 - pytest's hook
    # the tests marked slow first, the longest first (``slow(seconds=...)``): started late, the
    # real-weight sanity test (four minutes) would end the run alone; started first, it runs
    # beside the others, and scripts/test.sh's work stealing spreads the rest of its worker's
    # share over the workers that finish theirs first
    items.sort(key=lambda item: -_expected_s(item))


def _expected_s(item) -> float:
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    return float(marker.kwargs.get("seconds", 20.0))
