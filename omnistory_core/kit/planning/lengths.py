"""Narration length of a run, against the paper's reference average (~107 characters).

    python -m omnistory_core.kit.planning.lengths RUN_DIR [RUN_DIR ...]

reads each job's ``plans.jsonl`` (a job directory, or every job below a sweep directory) and
prints, per job, the number of parsed plans and their narration length in characters (mean,
median, min, max) next to the reference average, so prompt variants can be compared.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from omnistory_core.kit.planning.prompts import REFERENCE_NARRATION_CHARS


def narration_lengths(job_dir: str | Path) -> list[int]:
    """Character counts of the parsed narrations in ``<job_dir>/plans.jsonl``.

    Raises ``ValueError`` naming the file and line for a row that is not a JSON object.
    """
    path = Path(job_dir) / "plans.jsonl"
    lengths: list[int] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object")
        plan = row.get("plan")
        if isinstance(plan, dict) and isinstance(plan.get("narration"), str):
            lengths.append(len(plan["narration"].strip()))
    return lengths


def length_summary(
    lengths: list[int], reference: float = REFERENCE_NARRATION_CHARS
) -> dict[str, Any]:
    """n, mean, median, min, max and mean/reference of narration lengths (None when empty)."""
    if not lengths:
        return {
            "n": 0,
            "mean": None,
            "median": None,
            "min": None,
            "max": None,
            "reference_mean": reference,
            "ratio_to_reference": None,
        }
    mean = statistics.fmean(lengths)
    return {
        "n": len(lengths),
        "mean": round(mean, 1),
        "median": statistics.median(lengths),
        "min": min(lengths),
        "max": max(lengths),
        "reference_mean": reference,
        "ratio_to_reference": round(mean / reference, 3),
    }


def job_dirs(path: str | Path) -> list[Path]:
    """``path`` itself if it holds ``plans.jsonl``, else every job directory below it."""
    root = Path(path)
    if (root / "plans.jsonl").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("plans.jsonl"))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print((__doc__ or "usage: DIR [DIR ...]").strip(), file=sys.stderr)  # no docstring: -OO
        return 2
    print(f"{'job':<48} {'n':>4} {'mean':>7} {'median':>7} {'min':>5} {'max':>5} {'/ref':>6}")
    found = False
    for arg in args:
        for job in job_dirs(arg):
            found = True
            label = job.name if job == Path(arg) else str(job.relative_to(arg))
            s = length_summary(narration_lengths(job))
            cells = [
                s[k] if s[k] is not None else "-"
                for k in ("n", "mean", "median", "min", "max", "ratio_to_reference")
            ]
            print(
                f"{label[-48:]:<48} {cells[0]:>4} {cells[1]:>7} {cells[2]:>7} "
                f"{cells[3]:>5} {cells[4]:>5} {cells[5]:>6}"
            )
    if not found:
        print(f"no plans.jsonl under {', '.join(args)}", file=sys.stderr)
        return 1
    print(f"(the paper's gold narrations average {REFERENCE_NARRATION_CHARS} characters)")
    return 0


__all__ = ["job_dirs", "length_summary", "main", "narration_lengths"]


if __name__ == "__main__":
    sys.exit(main())
