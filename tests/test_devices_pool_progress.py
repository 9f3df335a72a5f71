"""The sweep's progress view shows the warm pool's model loads per component and device."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from omnistory_core.engine.pool import _note_load, loads_by_device
from omnistory_core.engine.sweep_progress import read_sweep_progress, render_sweep_progress


def test_the_view_lists_loads_per_component_and_device(tmp_path: Path) -> None:
    pool = tmp_path / ".pool"
    pool.mkdir()
    for component, devices in [
        ("image/dev", ["0"]),
        ("image/dev", ["1"]),
        ("image/dev", ["1"]),  # reloaded after its server died
        ("planner/glm", ["0", "1"]),  # tensor parallel: one load on two devices
    ]:
        _note_load(pool, {"component": component, "devices": devices}, 0.1)
    assert loads_by_device(pool) == {"image/dev": {"0": 1, "1": 2}, "planner/glm": {"0,1": 1}}
    progress = read_sweep_progress(tmp_path, expected_jobs=1)
    console = Console(width=200, record=True)
    console.print(render_sweep_progress(progress, "sweep"))
    assert "loads per device: image/dev 0:1 1:2; planner/glm 0,1:1" in console.export_text()


def test_no_pool_no_line(tmp_path: Path) -> None:
    console = Console(width=200, record=True)
    console.print(render_sweep_progress(read_sweep_progress(tmp_path, 1), "sweep"))
    assert "loads per device" not in console.export_text()
