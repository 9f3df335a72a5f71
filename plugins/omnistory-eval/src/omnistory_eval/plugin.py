"""omnistory-eval's plugin module: the metrics, the judges, the end-of-sweep evaluation and the
``evaluate``, ``judges`` and ``prefetch`` subcommands, through the core's hooks like any plugin.

Importing it is cheap: every registration imports what it registers only when called.
"""

from __future__ import annotations

from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_metrics(register):
    from omnistory_eval.metrics import METRICS
    from omnistory_eval.metrics.real import REAL_METRICS  # labelled stand-ins, own names

    for cls in (*METRICS, *REAL_METRICS):
        register(cls)


@hookimpl
def register_judges(register):
    from omnistory_eval.judges.judge import HOSTED_JUDGES, PAPER_JUDGES

    for cls in (*PAPER_JUDGES, *HOSTED_JUDGES):
        register(cls)


@hookimpl
def register_evaluation(register):
    from omnistory_eval.service import SweepEvaluation

    register(SweepEvaluation())


def _evaluate(argv: list[str]) -> int:
    from omnistory_eval.command import main

    return main(argv)


def _judges(argv: list[str]) -> int:
    from omnistory_eval.judges.command import main

    return main(argv)


def _prefetch(argv: list[str]) -> int:
    from omnistory_eval.prefetch import main

    return main(argv)


@hookimpl
def register_commands(register):
    register("evaluate", _evaluate, "metrics and judges over a sweep, evaluator-major")
    register("judges", _judges, "judge prompts and panels")
    register("prefetch", _prefetch, "download what the evaluators need, before going offline")


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_eval.conf")  # metric/*.yaml and the judge panels (judge/*.yaml)
