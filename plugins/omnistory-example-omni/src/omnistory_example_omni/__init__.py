"""Example omnistory backbones: copy this distribution to add an omnimodal model."""
