"""``python -m omnistory_core`` / ``omnistory``: the Hydra app plus subcommands.

python -m omnistory_core [hydra overrides]      run a system (or a sweep with -m)
python -m omnistory_core tasks                  the installed benchmarks (tasks)
python -m omnistory_core plugins                list plugins, what they register, load errors
python -m omnistory_core plugin new NAME --kind planner   a new plugin distribution to start from
python -m omnistory_core env create tts=parler  a virtual environment for one component
python -m omnistory_core progress SWEEP_DIR     a sweep's progress (any launcher; --watch)

Subcommands are registered by plugins (``register_commands``): the core's own above, and
``evaluate``, ``judges``, ``prefetch`` from omnistory-eval, ``report``, ``human`` from
omnistory-report.
"""

from __future__ import annotations

import sys

from omnistory_core.seams import EVAL_DISTRIBUTION, REPORT_DISTRIBUTION

#: subcommands other distributions provide: a clear line when they are not installed
ELSEWHERE = {
    "evaluate": EVAL_DISTRIBUTION,
    "judges": EVAL_DISTRIBUTION,
    "prefetch": EVAL_DISTRIBUTION,
    "report": REPORT_DISTRIBUTION,
    "human": REPORT_DISTRIBUTION,
}


def _hydra_main() -> int:
    import hydra

    from omnistory_core.app import explain_missing_configs, task
    from omnistory_core.redaction import check_overrides

    problem = check_overrides([a for a in sys.argv[1:] if not a.startswith("-")])
    if problem:
        print(f"omnistory: {problem}", file=sys.stderr)
        return 2
    app = hydra.main(
        version_base="1.3", config_path="pkg://omnistory_core.conf", config_name="config"
    )(task)
    with explain_missing_configs():
        app()
    return 0


def run_user_errors(fn) -> int:
    """Run ``fn``; a user error (bad config, dataset, plugin) is one line and exit 2."""
    from omnistory_core.errors import UserError

    try:
        return fn()
    except UserError as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2


def _is_command(word: str) -> bool:
    return bool(word) and "=" not in word and not word.startswith(("-", "+", "~"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and _is_command(argv[0]):
        from omnistory_core.plugins import load_plugins

        command = load_plugins().commands.get(argv[0])
        if command is not None:
            return run_user_errors(lambda: command.main(argv[1:]))
        if argv[0] in ELSEWHERE:
            from omnistory_core.seams import missing_distribution

            print(
                "omnistory: error: "
                + missing_distribution(f"`{argv[0]}`", ELSEWHERE[argv[0]], "the subcommand"),
                file=sys.stderr,
            )
            return 2
    sys.argv = [sys.argv[0], *argv]
    return run_user_errors(_hydra_main)


if __name__ == "__main__":
    sys.exit(main())
