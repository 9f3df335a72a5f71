"""Evaluator-major dedupe on a demo sweep: distinct items scored vs naive per-system scoring.

Runs an 8-system demo grid (planner=template,copy x image=copy,noop x tts=espeak,noop), then scores
it evaluator-major with the three metrics on tiny stand-in checkpoints (no download) and one text
judge served by a local OpenAI-compatible server.  Systems that share a narration, an image or an
utterance share the item: each is scored once.  Prints, per evaluator, the naive item count
(systems x examples with the needed outputs), the real model calls, their ratio and the wall time;
then a second, fully cached pass.

    python benchmarks/evaluation_dedupe.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID = ["planner=template,copy", "image=copy,noop", "tts=espeak,noop"]
JUDGE = "text-qwen3-30b-a3b"


def main() -> int:
    from omnistory_eval.judges import CRITERIA
    from omnistory_eval.runner import discover_systems, evaluate_systems
    from omnistory_testkit import LocalChatServer, Reply
    from omnistory_testkit import metric_checkpoints as testing

    from omnistory_core.data.cache import load_examples
    from omnistory_core.engine.job import build_component
    from omnistory_core.engine.store import Store
    from omnistory_core.plugins import load_plugins

    answer = json.dumps({c: {"score": 7, "rationale": "ok"} for c in CRITERIA["text"]})
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalChatServer(lambda body: Reply(content=answer)) as server,
    ):
        root = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "omnistory_core",
                "-m",
                *GRID,
                "output_root=out",
                "engine.progress=false",
                "evaluation.report=false",
            ],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        )
        run_dir = root / "out/sweeps/demo"
        systems = discover_systems(run_dir)
        examples, _ = load_examples({"name": "demo", "root": None, "limit": None})
        models = testing.build_all(root / "models")
        registry = load_plugins()
        specs = [
            (
                "metric",
                {
                    "name": "bertscore",
                    "model_type": str(models["roberta"]),
                    "num_layers": 2,
                    "device": "cpu",
                },
            ),
            ("metric", {"name": "clip", "model": str(models["clip"]), "device": "cpu"}),
            ("metric", {"name": "speech_meta", **testing.tiny_speech_meta_params(models)}),
            (
                "judge",
                {
                    "name": JUDGE,
                    "backend": "openai",
                    "base_url": server.base_url,
                    "model": "local",
                    "repair": False,
                },
            ),
        ]
        store = Store(root / "out/store")
        print(f"{len(systems)} systems x {len(examples)} demo examples")
        print(
            f"{'evaluator':<28}{'naive':>7}{'calls':>7}{'ratio':>8}{'seconds':>9}"
            f"{'cached calls':>14}{'cached s':>10}"
        )
        for kind, spec in specs:
            timings = []
            for _ in range(2):
                evaluator = build_component(registry, kind, dict(spec), seed=0, allow_oracle=False)
                t0 = time.perf_counter()
                result = evaluate_systems(systems, examples, [evaluator], store)
                timings.append((time.perf_counter() - t0, result))
            (first_s, first), (second_s, second) = timings
            key = next(iter(first.stats))
            naive, calls = first.items[key], first.stats[key].calls
            print(
                f"{key:<28}{naive:>7}{calls:>7}{calls / naive:>8.3f}{first_s:>9.2f}"
                f"{second.stats[key].calls:>14}{second_s:>10.2f}"
            )
        print(f"judge requests to the local server: {len(server.requests)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
