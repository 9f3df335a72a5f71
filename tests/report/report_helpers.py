"""Helpers of the report tests: DreamSim rows and an evaluator error on top of a synthetic run (see
conftest.py), the report the golden digests pin, and digests of what a report writes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd
from omnistory_report.command import build_report

from omnistory_core.scores import ScoreRow, read_scores, write_scores


def add_dreamsim(scores_path: Path) -> list[str]:
    """DreamSim rows for every system and example (``missing_output`` where semi-b's plan
    failed) and one image-judge error on orch-a's first example; returns the example ids."""
    rows = list(read_scores(scores_path))
    examples = sorted({r.example_id for r in rows})
    systems = sorted({r.system for r in rows})
    for s_num, system in enumerate(systems):
        for i, example in enumerate(examples):
            if system == "semi-b" and i == 2:  # its plan failed: no image
                rows.append(
                    ScoreRow(
                        system,
                        example,
                        "metric",
                        "image",
                        "dreamsim",
                        "distance",
                        None,
                        "missing_output",
                    )
                )
            else:
                value = 0.1 * (s_num + 1) + 0.05 * i
                rows.append(
                    ScoreRow(
                        system, example, "metric", "image", "dreamsim", "distance", value, "ok"
                    )
                )
    # the image judge ij2 could not answer on one example of orch-a
    rows = [
        ScoreRow(
            r.system,
            r.example_id,
            r.kind,
            r.track,
            r.evaluator,
            r.criterion,
            None,
            "error",
            cause="server down",
        )
        if (r.system, r.evaluator, r.example_id) == ("orch-a", "ij2", examples[0])
        else r
        for r in rows
    ]
    write_scores(scores_path, rows)
    return examples


def build_golden_report(run: Any, out: Path) -> Path:
    """The report of a synthetic run (conftest's ``rich_run``) with DreamSim rows and an error."""
    add_dreamsim(run.scores)
    return build_report(
        run.scores,
        out,
        run_dir=run.run_dir,
        examples=run.examples,
        bootstrap=50,
        weight_draws=50,
        print_table=False,
    )


def _csv_text(path: Path) -> bytes:
    # floats to 10 significant digits: the last bits of a least-squares fit may differ by machine
    try:
        frame = pd.read_csv(path)
    except ValueError:  # pandas' EmptyDataError: a table without columns
        return path.read_bytes()
    return frame.to_csv(index=False, float_format="%.10g").encode()


def output_digests(report: Path) -> dict[str, str]:
    """The report's files (its top folder, tables/ and figures/) -> a digest of their content;
    figures by name only, their bytes depend on the drawing library's build."""
    out = {}
    for path in sorted(p for p in report.rglob("*") if p.is_file()):
        name = path.relative_to(report).as_posix()
        if "/" in name and not name.startswith(("tables/", "figures/")):
            continue  # the per-example and per-system pages and their media
        if path.suffix == ".csv":
            data = _csv_text(path)
        elif path.suffix in (".md", ".json", ".html"):
            data = path.read_bytes()
        else:
            out[name] = ""
            continue
        out[name] = hashlib.sha256(data).hexdigest()[:16]
    return out
