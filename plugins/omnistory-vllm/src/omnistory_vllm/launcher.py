"""Start ``vllm serve <model>`` for a planner, wait until it is healthy, stop it afterwards.

The server runs in its own process group (``start_new_session``) so that stopping it also stops
the engine processes vLLM forks; it is stopped by :meth:`VLLMServer.stop` (the planner's
``unload``, i.e. right after the planner stage, freeing the GPU for the experts) and, as a
safety net, at interpreter exit.  Its output goes to a log file whose tail is quoted when the
server dies or never becomes healthy.  The process handling is
:class:`omnistory_core.kit.serving.ServerProcess`'s; this module keeps the planner's settings as
a dataclass and names them in its errors.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

from omnistory_core.kit.serving import LaunchError, ServerProcess, free_port

__all__ = ["LaunchError", "VLLMServer", "free_port"]


@dataclass
class VLLMServer(ServerProcess):
    """One ``vllm serve`` process.  ``executable`` may be a path or an argv prefix."""

    log_prefix = "omnistory-vllm"
    timeout_setting = "planner.launch_timeout_s"

    model: str
    executable: str | Sequence[str] = "vllm"
    host: str = "127.0.0.1"
    port: int | None = None  # None: __post_init__ picks a free one
    args: Sequence[str] = ()
    timeout_s: float = 1800.0
    log_path: str | None = None  # None: __post_init__ names one in the temp dir
    poll_interval_s: float = 0.5
    stop_grace_s: float = 30.0
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.port is None:
            self.port = free_port(self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1")
        if self.log_path is None:
            self.log_path = self.default_log_path()

    # the dataclass fields keep the names planners pass; the shared code reads these
    @property
    def poll_s(self) -> float:
        return self.poll_interval_s

    @property
    def grace_s(self) -> float:
        return self.stop_grace_s
