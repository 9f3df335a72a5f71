"""``python -m omnistory_core`` / ``omnistory``: the Hydra app plus subcommands.

python -m omnistory_core [hydra overrides]      run a system (or a sweep with -m)
python -m omnistory_core --verbose [...]        the same, keeping and showing full tracebacks
python -m omnistory_core tasks                  the installed benchmarks (tasks)
python -m omnistory_core plugins                list plugins, what they register, load errors
python -m omnistory_core plugin new NAME --kind planner   a new plugin distribution to start from
python -m omnistory_core env create tts=parler  a virtual environment for one component
python -m omnistory_core progress SWEEP_DIR     a sweep's progress (any launcher; --watch)

Subcommands are registered by plugins (``register_commands``): the core's own above, and
``evaluate``, ``judges``, ``prefetch`` from omnistory-eval, ``report``, ``export``, ``human``
from omnistory-report.
"""

from __future__ import annotations

import os
import sys

from omnistory_core.seams import EVAL_DISTRIBUTION, REPORT_DISTRIBUTION

#: subcommands other distributions provide: a clear line when they are not installed
ELSEWHERE = {
    "evaluate": EVAL_DISTRIBUTION,
    "judges": EVAL_DISTRIBUTION,
    "prefetch": EVAL_DISTRIBUTION,
    "report": REPORT_DISTRIBUTION,
    "export": REPORT_DISTRIBUTION,
    "human": REPORT_DISTRIBUTION,
}


#: the flag that keeps full tracebacks; stripped before Hydra parses the command line
VERBOSE_FLAG = "--verbose"
#: set by ``--verbose`` for this process and every process it starts (jobs, workers)
VERBOSE_ENV = "OMNISTORY_VERBOSE"


def take_verbose(argv: list[str], *, anywhere: bool) -> list[str]:
    """``argv`` without ``--verbose``; when it was there, ``OMNISTORY_VERBOSE=1`` is set so
    that worker processes (launchers, isolated components) see it too, and Hydra shows its full
    errors.  ``anywhere``: any position (a run's command line, where Hydra knows no such flag);
    else only before the first other argument (a subcommand's own flags are its own)."""
    if anywhere:
        rest = [a for a in argv if a != VERBOSE_FLAG]
    else:
        n = 0
        while n < len(argv) and argv[n] == VERBOSE_FLAG:
            n += 1
        rest = argv[n:]
    if len(rest) != len(argv):
        os.environ[VERBOSE_ENV] = "1"
        os.environ["HYDRA_FULL_ERROR"] = "1"
    return rest


def _hydra_main() -> int:
    import hydra

    from omnistory_core.app import (
        component_groups,
        explain_missing_configs,
        prepare_overrides,
        task,
    )
    from omnistory_core.compose_once import composing_once
    from omnistory_core.params import check_runner_overrides
    from omnistory_core.redaction import check_overrides

    overrides = [a for a in sys.argv[1:] if not a.startswith("-")]
    problem = check_overrides(overrides) or check_runner_overrides(overrides, component_groups())
    if problem:
        print(f"omnistory: {problem}", file=sys.stderr)
        return 2
    # before Hydra composes: plain `tts.temperature=0.5` reaches the component's own check
    sys.argv = [sys.argv[0], *prepare_overrides(take_verbose(sys.argv[1:], anywhere=True))]
    app = hydra.main(
        version_base="1.3", config_path="pkg://omnistory_core.conf", config_name="config"
    )(task)
    multirun = any(a in ("-m", "--multirun") for a in sys.argv[1:])
    with explain_missing_configs(), composing_once(multirun):
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
    from omnistory_core.noise import quiet_third_party

    argv = take_verbose(sys.argv[1:] if argv is None else argv, anywhere=False)
    command = argv[0] if argv and _is_command(argv[0]) else None
    if VERBOSE_FLAG not in argv:  # a run's --verbose comes later: _hydra_main takes it first
        quiet_third_party(command)
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
