"""The test kit's forked CLI runs (``omnistory_testkit.forkserver``) keep the contract of a new
interpreter started by ``subprocess.run``: arguments, working directory, environment, streams,
exit status, timeout; and fall back to a new interpreter where a fork could not honour the
environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from omnistory_testkit import forkserver, run_cli

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not hasattr(__import__("socket"), "send_fds"),
    reason="forked runs need fork and file-descriptor passing (Linux)",
)

#: a module that reports what it was started with, as JSON on stdout
PROBE = """
import json, os, sys, time
args = sys.argv[1:]
report = {
    "argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
    "var": os.environ.get("OMNISTORY_PROBE"), "stdin": [os.fstat(0).st_dev, os.fstat(0).st_ino],
    "hash": hash("omnistory"), "ppid": os.getppid(), "pid": os.getpid(),
    "main": __name__,
    "loaded": sorted({m.split(".")[0] for m in sys.modules}),
    "threads": os.environ.get("OMP_NUM_THREADS"),
}
print(json.dumps(report))
print("to stderr", file=sys.stderr)
if args and args[0] == "sleep":
    time.sleep(float(args[1]))
if args and args[0] == "late":
    import subprocess
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); print('late')"])
if args and args[0] == "exit":
    sys.exit(int(args[1]))
"""


@pytest.fixture
def probe_dir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv(forkserver.ENABLE_ENV, "1")
    (tmp_path / "omnistory_probe.py").write_text(PROBE, encoding="utf-8")
    return tmp_path


def _run(cwd: Path, *args: str, timeout: float = 60, **env: str):
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    return forkserver.run_module("omnistory_probe", list(args), cwd=cwd, env=full, timeout=timeout)


def _report(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[0])


def test_a_forked_run_is_started_as_python_dash_m(probe_dir: Path) -> None:
    proc = _run(probe_dir, "exit", "3", OMNISTORY_PROBE="set")
    real = subprocess.run(
        [sys.executable, "-m", "omnistory_probe", "exit", "3"],
        cwd=probe_dir,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "OMNISTORY_PROBE": "set"},
        capture_output=True,
        text=True,
    )
    forked, fresh = _report(proc), _report(real)
    assert forked["ppid"] != os.getpid()  # forked from a zygote, not started here
    assert fresh["ppid"] == os.getpid()
    for key in ("argv", "cwd", "path0", "var", "stdin", "main"):
        assert forked[key] == fresh[key], key
    assert forked["stdin"] == [os.fstat(0).st_dev, os.fstat(0).st_ino]  # the caller's, inherited
    assert proc.returncode == real.returncode == 3
    assert proc.stderr == real.stderr == "to stderr\n"
    assert proc.args == [sys.executable, "-m", "omnistory_probe", "exit", "3"]


def test_two_runs_in_a_row_hash_strings_with_other_seeds(probe_dir: Path) -> None:
    first, second = _report(_run(probe_dir)), _report(_run(probe_dir))
    assert first["ppid"] != second["ppid"]  # the two zygotes take turns
    assert first["hash"] != second["hash"]


def test_an_environment_read_at_the_start_starts_a_new_interpreter(probe_dir: Path) -> None:
    extra = probe_dir / "extra"
    extra.mkdir()
    forked = _report(_run(probe_dir))
    fresh = _report(_run(probe_dir, PYTHONPATH=str(extra)))
    assert forked["ppid"] != os.getpid() and fresh["ppid"] == os.getpid()
    # a library's settings are read where it loads: in the forked run, not in the zygote
    isa = _report(_run(probe_dir, CT2_FORCE_CPU_ISA="AVX", KMP_INIT_AT_FORK="FALSE"))
    assert isa["ppid"] != os.getpid()
    assert not set(forked["loaded"]) & forkserver.NOT_PRELOADED  # nothing of them preloaded
    # NumPy is preloaded: its BLAS settings start a new interpreter
    blas = _report(_run(probe_dir, OMP_NUM_THREADS="3", OPENBLAS_CORETYPE="Haswell"))
    assert blas["ppid"] == os.getpid() and blas["threads"] == "3"

    light, heavy = {"holds_heavy": False}, {"holds_heavy": True}
    assert forkserver.forkable({"OMNISTORY_X": "1", "CT2_FORCE_CPU_ISA": "AVX"}, {}, **light)
    starts = ("PYTHONHASHSEED", "LD_PRELOAD", "LC_ALL", "LANG", "TZ", "OPENSSL_CONF", "OMP_X")
    for start in starts:
        assert not forkserver.forkable({start: "x"}, {}, **light), start
    assert forkserver.forkable({"OMNISTORY_X": "1", "HOME": "/h"}, {"HOME": "/g"}, **heavy)
    assert not forkserver.forkable({"OPENBLAS_CORETYPE": "Haswell"}, {}, **heavy)
    assert not forkserver.forkable({}, {"CT2_FORCE_CPU_ISA": "AVX"}, **heavy)


def test_output_is_read_until_every_process_holding_it_closes_it(probe_dir: Path) -> None:
    proc = _run(probe_dir, "late")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-1] == "late"


def test_a_run_past_its_timeout_is_killed(probe_dir: Path) -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        _run(probe_dir, "sleep", "30", timeout=2)
    assert time.monotonic() - started < 20
    # the next run is served as usual
    assert _run(probe_dir, "exit", "0").returncode == 0


def test_runs_from_several_threads_at_once(probe_dir: Path) -> None:
    results: dict[int, object] = {}

    def one(i: int) -> None:
        results[i] = _run(probe_dir, "exit", str(i + 1))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {i: p.returncode for i, p in results.items()} == {0: 1, 1: 2, 2: 3, 3: 4}


def test_a_cli_error_reads_as_it_does_from_a_new_interpreter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(forkserver.ENABLE_ENV, "1")
    forked = run_cli("planner=no_such_planner", cwd=tmp_path)
    monkeypatch.setenv(forkserver.ENABLE_ENV, "0")
    fresh = run_cli("planner=no_such_planner", cwd=tmp_path)
    assert forked.returncode == fresh.returncode != 0
    assert (forked.stdout, forked.stderr) == (fresh.stdout, fresh.stderr)
    assert "no_such_planner" in forked.stderr
