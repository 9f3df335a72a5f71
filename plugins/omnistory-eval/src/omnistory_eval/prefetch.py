"""``python -m omnistory_core prefetch``: download every checkpoint a configuration needs.

For clusters whose compute nodes are offline: run this where the hub is reachable (it uses the
same Hugging Face cache the components read), then run the jobs offline.  It lists each checkpoint
with its size and whether it is gated (accept the licence on the hub and set HF_TOKEN first).
The local cache is read first and the hub is tried once with a short timeout
(``HF_HUB_ETAG_TIMEOUT``, default 5 s): offline, or with ``HF_HUB_OFFLINE=1``, the answer comes in
seconds.

    python -m omnistory_core prefetch image=dev tts=parler metric=bertscore judge=panel_a
    python -m omnistory_core prefetch --metrics bertscore,clip,speech_meta --judges all --dry-run
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def component_checkpoints(kind: str, cls: type, params: dict[str, Any]) -> list[str]:
    """Hub ids a component needs: those its ``load()`` reads (its own ``checkpoints(params)``, or
    its ``model`` / ``text_encoder`` parameters, or a judge's checkpoint: see
    :func:`omnistory_core.kit.hub.load_checkpoints`) and, for a judge with ``repair``, the
    JSON-repair
    model loaded at the end of its stage.  Local directories need nothing fetched."""
    from omnistory_core.kit.hub import load_checkpoints

    out = load_checkpoints(cls, params)
    if kind == "judge" and params.get("repair"):
        from omnistory_eval.judges import REPAIR_SPEC

        repair = params["repair"] if isinstance(params["repair"], dict) else {}
        # RepairModel loads ``checkpoint``; with the openai backend a server holds the model
        # (``model`` is its served name) and nothing is downloaded here
        served = str(repair.get("backend", "vllm")) == "openai"
        checkpoint = "" if served else str(repair.get("checkpoint") or REPAIR_SPEC.checkpoint)
        if checkpoint and checkpoint not in out and not Path(checkpoint).exists():
            out.append(checkpoint)
    return out


def collect(selections: list[str], overrides: list[str]) -> dict[str, list[str]]:
    """checkpoint -> the components that need it."""
    from omnistory_core.plugins import load_plugins
    from omnistory_eval.evaluators import evaluator_config, expand_panels

    registry = load_plugins()
    needed: dict[str, list[str]] = {}
    for selection in selections:
        group, _, name = selection.partition("=")
        if not name:
            raise SystemExit(f"expected <group>=<name>, got {selection!r}")
        names = expand_panels(group, [name]) if group == "judge" else [name]
        for member in names:
            params = evaluator_config(group, member, overrides)
            cls = registry.component(group, member)
            for checkpoint in component_checkpoints(group, cls, params):
                needed.setdefault(checkpoint, []).append(f"{group}/{member}")
    return needed


def prepare_local(selections: list[str], overrides: list[str], dry_run: bool) -> int:
    """Models that components provide from installed packages rather than the hub (a class's
    ``prefetch_local(params, dry_run)`` yields ``(model, where or why not, ok)``; e.g. the
    real-weight metrics reassemble split weights into their cache).  Prints one line each and
    returns how many could not be provided."""
    from omnistory_core.plugins import load_plugins
    from omnistory_eval.evaluators import evaluator_config, expand_panels

    registry = load_plugins()
    failed = 0
    for selection in selections:
        group, _, name = selection.partition("=")
        for member in expand_panels(group, [name]) if group == "judge" else [name]:
            hook = getattr(registry.component(group, member), "prefetch_local", None)
            if hook is None:
                continue
            for model, where, ok in hook(evaluator_config(group, member, overrides), dry_run):
                print(f"{model:<55} {where}  for {group}/{member}", flush=True)
                failed += not ok
    return failed


def describe(checkpoint: str) -> tuple[str, str]:
    """(size, gated) as text.  The local cache is looked at first; the hub is asked only when one
    short probe found it reachable, so an offline machine answers at once (said, not hidden)."""
    from omnistory_core.kit.hub import cached_snapshot, hub_reachable, probe_timeout

    local = cached_snapshot(checkpoint)
    reachable, why = hub_reachable()
    if not reachable:
        if local is not None:
            return f"in the local cache ({_tree_size(Path(local)) / 1e9:.2f} GB)", "?"
        return f"size unknown, not in the local cache ({why})", "?"
    try:
        from huggingface_hub import HfApi
    except ImportError:
        return "size unknown (pip install 'omnistory-core[hub]')", "?"
    try:
        info = HfApi().model_info(checkpoint, files_metadata=True, timeout=probe_timeout())
    except Exception as exc:  # offline, unknown repo, auth
        return f"size unknown ({type(exc).__name__})", "?"
    size = sum((s.size or 0) for s in info.siblings or [])
    gated = info.gated if info.gated else "no"
    cached = ", in the local cache" if local is not None else ""
    return f"{size / 1e9:.2f} GB{cached}", str(gated)


def _tree_size(path: Path) -> int:
    """Bytes under a snapshot directory (its files are links into the cache's blobs)."""
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file():
                total += item.stat().st_size
        except OSError:
            pass
    return total


def main(argv: list[str]) -> int:
    summary = (__doc__ or "").partition("\n")[0]  # no docstring under python -OO
    parser = argparse.ArgumentParser(prog="omnistory prefetch", description=summary)
    parser.add_argument("selection", nargs="*", help="<group>=<name>, e.g. image=dev judge=all")
    parser.add_argument("--metrics", default="", help="comma-separated metric names")
    parser.add_argument("--judges", default="", help="comma-separated judge ids or panels")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="override a parameter, e.g. metric.clip.model=...",
    )
    parser.add_argument("--dry-run", action="store_true", help="list only, download nothing")
    args = parser.parse_args(argv)
    selections = list(args.selection)
    selections += [f"metric={m.strip()}" for m in args.metrics.split(",") if m.strip()]
    selections += [f"judge={j.strip()}" for j in args.judges.split(",") if j.strip()]
    if not selections:
        parser.error("name at least one component")
    needed = collect(selections, args.overrides)
    failed = 0
    from omnistory_core.kit.hub import hub_reachable

    for checkpoint, users in needed.items():
        size, gated = describe(checkpoint)
        print(f"{checkpoint:<55} {size:<30} gated: {gated:<6} for {', '.join(users)}", flush=True)
        if args.dry_run:
            continue
        reachable, why = hub_reachable()
        if not reachable:  # each download would only retry its way to the same answer
            failed += 1
            print(f"  could not download {checkpoint}: {why}", file=sys.stderr)
            continue
        try:
            from huggingface_hub import snapshot_download

            path = snapshot_download(checkpoint, token=os.environ.get("HF_TOKEN") or None)
        except Exception as exc:
            failed += 1
            print(
                f"  could not download {checkpoint}: {type(exc).__name__}: {exc}", file=sys.stderr
            )
        else:
            print(f"  -> {path}")
    local_failed = prepare_local(selections, args.overrides, args.dry_run)
    if local_failed:
        print(f"{local_failed} local model(s) could not be provided", file=sys.stderr)
    if failed:
        print(f"{failed} of {len(needed)} checkpoints could not be downloaded", file=sys.stderr)
    return 1 if failed or local_failed else 0
