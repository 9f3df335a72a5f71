"""Reports: leaderboard files, statistics tables, figures and the static HTML viewer.

The ``report`` command lives in :mod:`omnistory_report.command` (``main(argv)``,
``build_report(...)``); nothing heavy is imported here.
"""
