"""Makes tests/ importable for the shared helpers in omnistory_testing.py."""
