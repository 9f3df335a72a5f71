"""Registers the judges through the core ``register_judges`` hook.

Point an entry point (or the built-in plugin) at this module; importing it is cheap.
"""

from __future__ import annotations

from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_judges(register):
    from omnistory_core.evaluation.judges.judge import HOSTED_JUDGES, PAPER_JUDGES

    for cls in (*PAPER_JUDGES, *HOSTED_JUDGES):
        register(cls)
