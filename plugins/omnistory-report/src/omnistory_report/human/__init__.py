"""The human evaluation of Appendix F.5: a Label Studio round trip.

``human export`` samples the items (:mod:`.export`) and writes a Label Studio project
(:mod:`.labelstudio`); ``human import`` turns its JSON export into ``kind: human`` rows of the
scores table (:mod:`.import_`); the report computes Tables 18–21 from them
(:mod:`omnistory_report.analysis.human`).
"""
