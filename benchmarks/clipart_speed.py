"""CPU cost of image=clipart with the real encoder and library: first load (embeds every label),
a cached load, and a page; prints seconds and the cached/first load ratio from one run.

    python benchmarks/clipart_speed.py        # needs omnistory-clipart[encoder] + openclipart-png
"""

from __future__ import annotations

import tempfile
import time

from omnistory_clipart.expert import ClipArtImage

PROMPTS = (
    "Lena, a small girl in a yellow raincoat, looks up at the round moon caught in an old oak",
    "a small orange fox runs across the snowy field",
    "a red kite flies over the beach",
)


def main() -> None:
    store = tempfile.mkdtemp()
    start = time.perf_counter()
    first = ClipArtImage()
    first.bind_store(store)
    first.load()
    loaded = time.perf_counter()
    again = ClipArtImage()
    again.bind_store(store)
    again.load()
    cached = time.perf_counter()
    pages = []
    for prompt in PROMPTS:
        t = time.perf_counter()
        picks = first.retrieve(prompt)
        first.run_one({"image_prompt": prompt, "current_image": None})
        pages.append(time.perf_counter() - t)
        print(f"{prompt[:48]!r:52} -> {[p for p, _ in picks]}")
    print(
        f"labels {len(first._files)}  first load {loaded - start:.1f} s  cached load"
        f" {cached - loaded:.2f} s  ratio {(cached - loaded) / (loaded - start):.4f}"
        f"  per page {sum(pages) / len(pages):.2f} s"
    )


if __name__ == "__main__":
    main()
