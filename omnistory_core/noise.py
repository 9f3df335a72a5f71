"""Third-party loading noise, silenced unless ``--verbose``.

Loading a checkpoint through transformers 5 logs a load report per model (a table of
``UNEXPECTED``/``MISSING`` keys: a CLIP vision tower loaded from a full CLIP checkpoint reports
every text-tower key) and draws a ``Loading weights`` bar per model; diffusers does the same.
An evaluation loads several models per evaluator, so these reports bury the lines that matter
(the failure summary, the pre-flight).  The libraries read their verbosity from the environment
when they are first imported, so :func:`quiet_third_party` sets it there, before any of them is
imported, for this process and every process it starts (jobs, isolation workers, replicas).

A value the user set is kept; ``--verbose`` (``OMNISTORY_VERBOSE=1``) keeps every library's own
defaults.  Download bars stay on for ``prefetch``, whose work they show.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping

#: what quiets each library: its own environment variable, read when it is imported
QUIET_ENV: dict[str, str] = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DIFFUSERS_VERBOSITY": "error",
}
#: the per-model progress bars of huggingface_hub, transformers and diffusers
NO_BARS_ENV: dict[str, str] = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}
#: the libraries whose logger is set directly when already imported (a test process)
LOGGERS: tuple[str, ...] = ("transformers", "diffusers")
#: subcommands whose downloads the bars show
KEEP_BARS: frozenset[str] = frozenset({"prefetch"})


def verbose(environ: MutableMapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("OMNISTORY_VERBOSE", "") not in ("", "0")


def quiet_third_party(
    command: str | None = None, environ: MutableMapping[str, str] | None = None
) -> bool:
    """Quiet the loading reports and bars of the model libraries (see the module docstring);
    ``command``: the subcommand being run (None: a run).  Returns whether anything was quieted
    (False under ``--verbose``)."""
    env = os.environ if environ is None else environ
    if verbose(env):
        return False
    wanted = dict(QUIET_ENV)
    if command not in KEEP_BARS:
        wanted.update(NO_BARS_ENV)
    for name, value in wanted.items():
        env.setdefault(name, value)
    if environ is None:
        for name in LOGGERS:
            if name in sys.modules and env.get(f"{name.upper()}_VERBOSITY") == "error":
                logging.getLogger(name).setLevel(logging.ERROR)
    return True


__all__ = ["KEEP_BARS", "LOGGERS", "NO_BARS_ENV", "QUIET_ENV", "quiet_third_party", "verbose"]
