"""Small seeded samples of the shipped data sets (real data, fast)."""

from __future__ import annotations

import pytest

from dpstats.synth.datasets import load_dataset


@pytest.fixture(scope="session")
def bank():
    df, schema = load_dataset("bank")
    return df.sample(3000, random_state=0).reset_index(drop=True), schema


@pytest.fixture(scope="session")
def shopping():
    df, schema = load_dataset("shopping")
    return df.sample(3000, random_state=1).reset_index(drop=True), schema
