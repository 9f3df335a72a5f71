"""ViStoryBench (story visualization) as an omnistory task.

Modules: ``dataset`` (the official ViStory layout, splits, languages, the official prompt merge),
``layout`` (the official method-output layouts, written and read), ``leaderboard`` (the official
rank-based leaderboard), ``metrics`` (the 12 metrics), ``plugin`` (hooks).  Nothing heavy is
imported here.
"""
