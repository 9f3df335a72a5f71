"""Images per second of a full-size FLUX.1-dev pipeline with random weights (CUDA GPU only).

The pipeline has FLUX.1-dev's architecture (12B transformer, T5-XXL, CLIP-L, 16-channel VAE) with
random weights built on the GPU in bf16 (``omnistory_flux.random_pipeline``), so it needs no gated
checkpoint and costs what the real model costs per image.  Images are generated through the
``image=dev`` expert's own batched path (``FluxDev.run_batch``: per-item seeds, one pipeline call
per batch, float -> PIL conversion) at 1024x1024, 28 steps, guidance 3.5, 512 T5 tokens.

    python benchmarks/flux_throughput.py                      # batch sizes 1 and 4, 8 images each
    python benchmarks/flux_throughput.py --batch-sizes 1,2,4,8 --images 16 --json out.json

Loading time is not measured (the weights are random).  On a machine without CUDA the script exits
with status 2 and says so; ``--tiny --allow-cpu`` runs the same code on a toy model for a smoke test
(its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="1,4", help="comma-separated (default 1,4)")
    parser.add_argument("--images", type=int, default=8, help="timed images per batch size")
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--size", type=int, default=1024, help="height and width in pixels")
    parser.add_argument("--warmup", type=int, default=1, help="untimed batches per batch size")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--tiny", action="store_true", help="toy model (smoke test only)")
    parser.add_argument("--allow-cpu", action="store_true", help="with --tiny: run on the CPU")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not (args.tiny and args.allow_cpu):
        print(
            "flux_throughput: no CUDA device is visible (torch.cuda.is_available() is False); "
            "this benchmark times FLUX.1-dev in bf16 on a GPU and measured nothing.",
            file=sys.stderr,
        )
        return 2
    from omnistory_flux.experts import FluxDev
    from omnistory_flux.random_pipeline import random_flux_pipeline

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    size = "tiny" if args.tiny else "full"
    t0 = time.perf_counter()
    pipe = random_flux_pipeline("dev", size, device=device, dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in pipe.transformer.parameters())
    print(
        f"built random FLUX.1-dev ({size}, transformer {params / 1e9:.2f}B params, {dtype}) "
        f"on {device} in {build_s:.0f} s",
        flush=True,
    )

    results = []
    for batch_size in [int(b) for b in args.batch_sizes.split(",") if b.strip()]:
        expert = FluxDev(
            model=f"random-{size}",
            seed=0,
            steps=args.steps,
            height=args.size,
            width=args.size,
            dtype=str(dtype).removeprefix("torch."),
            device=device,
            batch_size=batch_size,
        )
        expert.pipe, expert.device = pipe, device  # random weights: nothing to load
        prompts = [f"a storybook illustration, scene {i}" for i in range(args.images)]
        for w in range(args.warmup):
            expert.run_batch([{"image_prompt": f"warm-up {w}.{i}"} for i in range(batch_size)])
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        outputs = expert.run_batch([{"image_prompt": p} for p in prompts])
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        failures = [o for o in outputs if not hasattr(o, "size")]
        row = {
            "batch_size": batch_size,
            "images": len(prompts),
            "failures": len(failures),
            "seconds": round(seconds, 3),
            "images_per_s": round(len(prompts) / seconds, 4),
            "s_per_image": round(seconds / len(prompts), 3),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1)
            if device == "cuda"
            else None,
        }
        results.append(row)
        print(json.dumps(row), flush=True)
        if failures:
            print(f"  first failure: {failures[0]}", flush=True)

    report = {
        "benchmark": "flux_throughput",
        "model": f"FLUX.1-dev architecture, random weights ({size})",
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        "dtype": str(dtype),
        "torch": torch.__version__,
        "steps": args.steps,
        "size": args.size,
        "guidance_scale": 3.5,
        "max_sequence_length": 512,
        "results": results,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
