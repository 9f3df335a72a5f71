"""omnistory_core: run, extend and evaluate story-continuation systems (Omni-StoryBench first).

Importing this package is light on purpose (no torch, no model stacks); see docs/index.md.
"""
