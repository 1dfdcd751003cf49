"""Algorithms for one regression coefficient (sce)."""
