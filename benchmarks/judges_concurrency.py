"""Judge backend benchmark: requests in flight vs the configured concurrency.

Runs a text judge through the OpenAI-compatible backend (the real ``openai`` SDK) against the local
chat-completions server on 127.0.0.1, which holds every request open for ``--latency`` seconds.
For each configured concurrency it prints the peak and the time-averaged number of requests the
server was serving at once, the wall time and the throughput, and checks the peak never exceeds the
configured bound.

    python benchmarks/judges_concurrency.py [--items 64] [--latency 0.05] [--levels 1,2,4,8,16]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from omnistory_eval.judges import CRITERIA
from omnistory_eval.judges.judge import Qwen3TextJudge
from omnistory_testkit import LocalChatServer, Reply

ANSWER = json.dumps({k: {"score": 7, "rationale": "fine"} for k in CRITERIA["text"]})
ITEM = {
    "metadata": {"genre": "Fable", "topic": "sharing"},
    "conditions": {"scene": "meadow", "text_instruction": "share", "ambient_sound": "birds"},
    "current_text": "The fox found grapes.",
    "reference_text": "The fox shared the grapes.",
    "candidate_text": "The fox gave half to the crow.",
}


class InFlightSampler:
    """Samples the server's in-flight count every ``period`` seconds (time average, peak)."""

    def __init__(self, server: LocalChatServer, period: float = 0.001):
        self.server, self.period = server, period
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.server.in_flight)
            time.sleep(self.period)

    def __enter__(self) -> InFlightSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(concurrency: int, items: int, latency: float) -> dict[str, float]:
    with LocalChatServer(lambda body: Reply(content=ANSWER, delay=latency)) as server:
        judge = Qwen3TextJudge(backend="openai", base_url=server.base_url, concurrency=concurrency)
        judge.load()
        with InFlightSampler(server) as sampler:
            t0 = time.perf_counter()
            results = judge.run_batch([ITEM] * items)
            wall = time.perf_counter() - t0
        judge.unload()
        busy = [s for s in sampler.samples if s > 0]
    ok = sum(r.status == "ok" for r in results)
    return {
        "concurrency": concurrency,
        "peak_in_flight": server.max_in_flight,
        "mean_in_flight": sum(busy) / len(busy) if busy else 0.0,
        "wall_s": wall,
        "requests_per_s": items / wall,
        "ok": ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request")
    parser.add_argument("--levels", default="1,2,4,8,16")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    print(f"{args.items} judge requests, server latency {args.latency * 1000:.0f} ms each")
    header = ("concurrency", "peak", "mean", "wall s", "req/s", "ideal req/s")
    print(" ".join(h.rjust(w) for h, w in zip(header, (11, 5, 6, 7, 7, 11), strict=True)))
    bad = False
    for level in levels:
        row = measure(level, args.items, args.latency)
        ideal = level / args.latency
        print(
            f"{level:>11} {row['peak_in_flight']:>5} {row['mean_in_flight']:>6.2f} "
            f"{row['wall_s']:>7.2f} {row['requests_per_s']:>7.1f} {ideal:>11.1f}"
        )
        if row["peak_in_flight"] > level or row["ok"] != args.items:
            bad = True
    if bad:
        print("FAIL: the bound was exceeded or some requests failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
