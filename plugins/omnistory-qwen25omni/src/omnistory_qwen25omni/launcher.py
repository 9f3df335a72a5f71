"""``backbone.launch=true``: start ``vllm serve <model> --omni``, wait for ``/health``, stop it.

The server runs in its own session (process group), so stopping it also stops the stage workers
vLLM-Omni forks; :meth:`OmniServer.stop` runs at the backbone's ``unload`` (right after the
backbone stage, which frees the GPU for the image expert) and, as a safety net, at interpreter
exit.  Its output goes to a log file whose tail is quoted when it dies or never becomes healthy.
The process handling is :class:`omnistory_core.kit.serving.ServerProcess`'s.
"""

from __future__ import annotations

from omnistory_core.kit.serving import LaunchError, ServerProcess, free_port

__all__ = ["LaunchError", "OmniServer", "free_port"]


class OmniServer(ServerProcess):
    """One ``<executable> serve <model> --omni --host H --port P [args]`` process."""

    serve_flags = ("--omni",)
    log_prefix = "omnistory-vllm-omni"
    timeout_setting = "backbone.launch_timeout_s"
    exited_message = (
        "`{command}` exited with status {code} before answering /health; "
        "last lines of {log_path}:\n{log_tail}"
    )
    timeout_message = (
        "`{command}` did not answer {health_url} within {timeout_s:g} s ({timeout_setting}); "
        "stopped it. Last lines of {log_path}:\n{log_tail}"
    )
