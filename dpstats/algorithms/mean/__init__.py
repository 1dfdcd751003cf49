"""Algorithms for a mean vector (mean)."""
