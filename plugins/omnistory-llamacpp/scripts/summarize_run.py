"""Summarize a planner=llamacpp run: seconds and tokens per planner call (from the store) and
how many plans were schema-valid (from plans.jsonl).

    python -m omnistory_core system=llamacpp_copy_espeak planner.model=q05.gguf \\
        planner.threads=2 dataset.limit=3 output_root=out
    python plugins/omnistory-llamacpp/scripts/summarize_run.py out
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path) -> None:
    for record in sorted((root / "store" / "calls").glob("*/*.json")):
        call = json.loads(record.read_text())
        if call["component"] == "planner/llamacpp":
            usage = call.get("usage") or {}
            print(
                f"call {call['seconds']:.1f} s, {usage.get('input_tokens')} tokens in,"
                f" {usage.get('output_tokens')} out, truncated {usage.get('truncated_calls')}"
            )
    for plans in sorted(root.glob("runs/*/*/plans.jsonl")):
        rows = [json.loads(line) for line in plans.read_text().splitlines()]
        valid = sum(row["plan"] is not None for row in rows)
        failures = [row["failure"]["category"] for row in rows if row["failure"]]
        print(f"{plans.parent.name}: {valid}/{len(rows)} schema-valid plans {failures}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
