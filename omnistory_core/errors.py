"""The errors a user can fix, shared by every layer.

A leaf: it imports nothing from ``omnistory_core``, so the parameter declarations
(:mod:`omnistory_core.params`), the engine and the command line can all raise and catch them
without importing each other.  The command line reports any :class:`UserError` in one line and
exits with status 2.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix (a configuration, a dataset, a plugin): one line, exit 2."""


class ConfigError(UserError):
    """A configuration that cannot run (unknown component, oracle without the flag, ...)."""


class PluginError(UserError):
    """A registration problem (unknown component name, wrong kind, ...)."""


__all__ = ["ConfigError", "PluginError", "UserError"]
