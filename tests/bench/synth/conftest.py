"""The seeded samples of the shipped data sets, shared with ``tests/synth``."""

from tests.synth.conftest import bank, shopping  # noqa: F401 - pytest fixtures

