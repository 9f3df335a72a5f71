"""``python -m omnistory_core judges ...``: audit the judges.

judges list
    the judges, their track, panel, checkpoint, backend and paper settings (each judge's
    parameters: ``plugins --params judge=<id>``)
judges show-prompt --judge ID [--example-id ID | --index N] [--system-dir DIR]
                   [--dataset demo|omnistorybench] [--dataset-root DIR] [--json]
    the exact messages judge ID receives for one example.  Candidates come from DIR: a job
    directory of this framework (``records.jsonl``) or the official layout
    (``text/<i>/generated.txt``, ``image/<i>/generated.png``, ``speech/<i>/generated.wav``);
    without --system-dir, labelled placeholders stand in for the candidate outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omnistory_eval.judges.render import TRACK_READS, JudgeInputError, render_prompt
from omnistory_eval.judges.specs import HOSTED_SPECS, JUDGE_SPECS, judge_spec

PLACEHOLDERS = {
    "candidate_text": "<candidate narration: pass --system-dir to show a system's output>",
    "candidate_image": "<candidate image: pass --system-dir>",
    "candidate_speech": "<candidate speech: pass --system-dir>",
}
_OFFICIAL = {
    "candidate_text": ("text", "generated.txt"),
    "candidate_image": ("image", "generated.png"),
    "candidate_speech": ("speech", "generated.wav"),
}


class CommandError(Exception):
    """A problem with the command line or its files."""


def _parser() -> argparse.ArgumentParser:
    summary = (__doc__ or "").partition("\n")[0]  # no docstring under python -OO
    parser = argparse.ArgumentParser(prog="omnistory judges", description=summary)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the judges and their settings")
    show = sub.add_parser("show-prompt", help="print the exact messages a judge receives")
    show.add_argument("--judge", required=True, help="judge id (see `judges list`)")
    which = show.add_mutually_exclusive_group()
    which.add_argument("--example-id", help="example id, e.g. source/book/page_001__page_002")
    which.add_argument("--index", type=int, help="row index (candidate index); default 0")
    show.add_argument("--system-dir", type=Path, help="a system's outputs (job dir or official)")
    show.add_argument("--dataset", default="demo", help="dataset name (demo | omnistorybench)")
    show.add_argument("--dataset-root", help="local copy of the dataset release")
    show.add_argument("--json", action="store_true", help="print the rendered prompt as JSON")
    return parser


# -- list ---------------------------------------------------------------------------------------


def list_judges() -> str:
    rows = [("id", "track", "panel", "backend", "context", "max_new", "seed", "checkpoint")]
    for spec in [*JUDGE_SPECS.values(), *HOSTED_SPECS.values()]:
        rows.append(
            (
                spec.id,
                spec.track,
                spec.panel or "-",
                spec.backend,
                str(spec.context_limit or "default"),
                str(spec.max_new_tokens),
                str(spec.seed),
                spec.checkpoint or "(set `model`)",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
    return (
        f"{table}\n\nparameters (backend, endpoint, decoding, engine; type, default, doc): "
        "python -m omnistory_core plugins --params judge=<id>\n"
        "set one for a run: evaluate RUN --judges <id> --set judge.<id>.<key>=<value>"
    )


# -- show-prompt -----------------------------------------------------------------------------


def _load_examples(dataset: str, root: str | None) -> list[Any]:
    from omnistory_core.data import load_dataset

    spec: dict[str, Any] = {"name": dataset}
    if root:
        spec["root"] = root
        spec["download"] = False
    return load_dataset(spec)


def _pick(examples: list[Any], example_id: str | None, index: int | None) -> Any:
    if example_id is not None:
        for example in examples:
            if example.id == example_id:
                return example
        raise CommandError(f"no example with id {example_id!r} in the dataset")
    index = 0 if index is None else index
    for example in examples:
        if example.index == index:
            return example
    raise CommandError(f"no example with index {index} (the dataset has {len(examples)} rows)")


def _candidate_paths(system_dir: Path, index: int) -> dict[str, Path]:
    """Candidate files of one example: job directory (records.jsonl) or the official layout."""
    records = system_dir / "records.jsonl"
    if records.exists():
        for n, line in enumerate(records.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise CommandError(f"{records}:{n}: invalid JSON: {exc}") from exc
            if record.get("index") != index:
                continue
            out = {}
            for name, (modality, _) in _OFFICIAL.items():
                entry = record.get(modality) or {}
                if entry.get("status") == "ok" and entry.get("path"):
                    out[name] = system_dir / entry["path"]
            return out
        return {}
    out = {}
    for name, (modality, filename) in _OFFICIAL.items():
        path = system_dir / modality / str(index) / filename
        if path.exists():
            out[name] = path
    return out


def example_item(example: Any, system_dir: Path | None, reads: tuple[str, ...]) -> dict[str, Any]:
    """The evaluation item for one example, with candidates from ``system_dir`` or placeholders."""
    item: dict[str, Any] = {
        "example_id": example.id,
        "metadata": example.metadata,
        "conditions": example.conditions,
        "current_text": example.current.text,
        "current_image": example.current.image,
        "reference_text": example.reference.next_page.text,
        "reference_image": example.reference.next_page.image,
        "reference_speech": example.reference.speech.to_dict(),
    }
    if system_dir is None:
        item.update(PLACEHOLDERS)
        return item
    if not system_dir.is_dir():
        raise CommandError(f"--system-dir {system_dir} is not a directory")
    found = _candidate_paths(system_dir, example.index)
    for name in PLACEHOLDERS:
        if name not in reads:
            continue
        if name not in found:
            raise CommandError(
                f"{system_dir}: no {name.removeprefix('candidate_')} output for example "
                f"{example.id!r} (index {example.index})"
            )
        path = found[name]
        item[name] = path.read_text(encoding="utf-8") if name == "candidate_text" else str(path)
    return item


def _format_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        kind = part["type"]
        pieces.append(part["text"] if kind == "text" else f"[{kind} attachment: {part[kind]}]")
    return "".join(pieces)


def format_prompt(rendered: Any) -> str:
    """Human-readable dump; message texts are printed byte for byte between the rules."""
    spec = judge_spec(rendered.judge_id)
    lines = [
        f"judge: {spec.id} ({spec.checkpoint or 'hosted'}), track: {spec.track}",
        f"decoding: {json.dumps(spec.decoding())}",
        f"chat_template_kwargs: {json.dumps(rendered.chat_template_kwargs)}",
    ]
    if rendered.stop_token_ids:
        lines.append(f"stop_token_ids: {list(rendered.stop_token_ids)}")
    if rendered.json_schema is not None:
        lines.append("constrained decoding: JSON schema with the four required keys")
    lines.append(f"media, in order: {[f'{m.kind}: {m.path}' for m in rendered.media]}")
    for message in rendered.messages:
        lines += [f"----- {message['role']} -----", _format_content(message["content"])]
    if rendered.template_messages is not None:
        lines.append("===== chat-template input (<image> at each attachment) =====")
        for message in rendered.template_messages:
            lines += [f"----- {message['role']} -----", message["content"]]
    if rendered.prompt is not None:
        lines += ["===== serialized prompt (audio passed separately) =====", rendered.prompt]
    lines.append("----- end -----")
    return "\n".join(lines)


def show_prompt(args: argparse.Namespace) -> str:
    try:
        spec = judge_spec(args.judge)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None
    examples = _load_examples(args.dataset, args.dataset_root)
    example = _pick(examples, args.example_id, args.index)
    item = example_item(example, args.system_dir, TRACK_READS[spec.track])
    rendered = render_prompt(spec.id, item)
    if args.json:
        return json.dumps(rendered.to_dict(), indent=2, ensure_ascii=False)
    return format_prompt(rendered)


def main(argv: list[str]) -> int:
    """Entry point of ``judges``; returns the exit status (2 for user errors)."""
    from omnistory_core.data import DatasetError

    args = _parser().parse_args(argv)
    try:
        text = list_judges() if args.command == "list" else show_prompt(args)
    except (CommandError, JudgeInputError, DatasetError, OSError) as exc:
        print(f"omnistory judges: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text + "\n")
    return 0
