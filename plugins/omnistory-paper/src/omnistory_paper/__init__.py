"""The Omni-StoryBench paper's system presets (``system=<id>``) and suites."""
