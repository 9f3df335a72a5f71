"""The error for a configuration that cannot run, shared by every layer.

A leaf: it imports nothing from ``omnistory_core``, so the parameter declarations
(:mod:`omnistory_core.params`), the engine and the command line can all raise and catch it without
importing each other.  ``omnistory_core.engine.system.ConfigError`` (its old home),
``omnistory_core.engine.job.ConfigError`` and ``omnistory_core.api.ConfigError`` are this class.
"""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration that cannot run (unknown component, oracle without the flag, ...).

    The command line reports it in one line and exits with status 2."""


__all__ = ["ConfigError"]
