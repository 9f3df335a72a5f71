"""What the other modules of this package need of the task's declaration, below all of them: its
name, version and the inputs a generation component may ``reads``.

:mod:`omnistory_vistorybench.task` builds the :class:`~omnistory_core.api.Task` from these and
wires in the generation, evaluation and report (imported when called); the modules it wires in
import this one, never the task, so the package has one direction of imports.
"""

from __future__ import annotations

NAME = "vistorybench"
VERSION = "1"

#: the names a generation component of this task may declare in ``reads`` (what each holds: the
#: table in :mod:`omnistory_vistorybench.task`)
INPUTS: tuple[str, ...] = (
    "image_prompt",
    "shot_prompt",
    "current_image",
    "character_refs",
    "shot",
    "characters",
)

__all__ = ["INPUTS", "NAME", "VERSION"]
