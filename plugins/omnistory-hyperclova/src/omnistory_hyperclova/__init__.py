"""omnistory backbone ``hyperclova``: HyperCLOVA X SEED Omni 8B served by OmniServe (Track B)."""
