"""``python -m omnistory_core`` / ``omnistory``: the Hydra app plus a few plain subcommands.

python -m omnistory_core [hydra overrides]      run a system (or a sweep with -m)
python -m omnistory_core plugins                list plugins, what they register, load errors
python -m omnistory_core plugin new NAME --kind planner   a new plugin distribution to start from
python -m omnistory_core report ...             leaderboard, statistics, figures, HTML
python -m omnistory_core evaluate RUN_DIR       metrics and judges over a sweep
python -m omnistory_core judges ...             judge prompts and panels
python -m omnistory_core env create tts=parler  a virtual environment for one component
python -m omnistory_core progress SWEEP_DIR     a sweep's progress (any launcher; --watch)
"""

from __future__ import annotations

import sys

SUBCOMMANDS = (
    "plugins",
    "plugin",
    "report",
    "evaluate",
    "judges",
    "env",
    "prefetch",
    "human",
    "progress",
)


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


def _run_user_errors(fn) -> int:
    from omnistory_core.data import DatasetError
    from omnistory_core.engine.job import ConfigError
    from omnistory_core.plugins import PluginError

    try:
        return fn()
    except (DatasetError, ConfigError, PluginError) as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        command, rest = argv[0], argv[1:]
        if command == "plugins":
            from omnistory_core.cli_plugins import main as plugins_main

            return plugins_main(rest)
        if command == "plugin":
            from omnistory_core.scaffold import main as scaffold_main

            return scaffold_main(rest)
        if command == "report":
            from omnistory_core.report.command import main as report_main

            return report_main(rest)
        if command == "evaluate":
            from omnistory_core.evaluation.command import main as evaluate_main

            return _run_user_errors(lambda: evaluate_main(rest))
        if command == "prefetch":
            from omnistory_core.prefetch import main as prefetch_main

            return _run_user_errors(lambda: prefetch_main(rest))
        if command == "env":
            from omnistory_core.environments import main as env_main

            return _run_user_errors(lambda: env_main(rest))
        if command == "human":
            from omnistory_core.human.command import main as human_main

            return human_main(rest)
        if command == "progress":
            from omnistory_core.engine.sweep_progress import main as progress_main

            return progress_main(rest)
        if command == "judges":
            from omnistory_core.evaluation.judges.command import main as judges_main

            return judges_main(rest)
    sys.argv = [sys.argv[0], *argv]
    return _run_user_errors(_hydra_main)


if __name__ == "__main__":
    sys.exit(main())
