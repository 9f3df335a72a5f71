"""Example omnistory plugin: the ``instruction`` planner."""

__version__ = "0.1.0"
