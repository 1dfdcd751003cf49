"""Algorithms for the whole coefficient vector (linreg)."""
