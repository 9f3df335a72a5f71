"""DreamSim (Fu et al., 2023) as an optional omnistory metric: ``metric=dreamsim``."""
