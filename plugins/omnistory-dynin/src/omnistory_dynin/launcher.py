"""``backbone.launch=true``: start a vLLM-Omni server, wait until it answers, stop it afterwards.

The command is ``<launch_executable> serve <model> --omni --host H --port P <launch_args...>``
(vLLM-Omni plugs into the ``vllm`` command; ``--omni`` selects its multi-stage engine, which runs
Dynin-Omni as the three stages token2text, token2image and token2audio).  The server runs in a
process group of its own so stopping it also stops the engine processes it forks; it is stopped by
the backbone's ``unload`` and, as a safety net, at interpreter exit.  Its output goes to a log file
whose last lines are quoted when it dies or never becomes healthy.  The process handling is
:class:`omnistory_core.kit.serving.ServerProcess`'s.
"""

from __future__ import annotations

from omnistory_core.kit.serving import LaunchError, ServerProcess, free_port

__all__ = ["LaunchError", "OmniServer", "free_port"]


class OmniServer(ServerProcess):
    """One ``vllm serve <model> --omni`` process."""

    serve_flags = ("--omni",)
    log_prefix = "omnistory-dynin"
    timeout_setting = "backbone.launch_timeout_s"
    exited_message = (
        "`{command}` exited with status {code} before it became healthy; "
        "last lines of {log_path}:\n{log_tail}"
    )
