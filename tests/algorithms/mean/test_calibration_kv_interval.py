"""kv_interval: the scales of both Gaussian releases pinned by running the algorithm.

The docs page (docs/algorithms/mean/kv_interval.md) gives, for the ``d_l`` columns with a
non-empty range and rows scaled into ``[-1, 1]`` (replace-one neighbours, n public):
the clipped second moment has L2 sensitivity ``sqrt(d_l)/n`` and spends ``var_share`` of rho;
the clipped mean has sensitivity ``2 sqrt(d_l)/n`` and spends all that remains.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpstats.algorithms import get
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import zcdp_rho
from tests.noise_spy import RecordingGenerator


@pytest.fixture(scope="module")
def corpus():
    return Corpus.public()


@pytest.mark.parametrize("instance", ["mean_engel_food", "mean_mrw92_solow", "mean_grogger91"])
@pytest.mark.parametrize("eps, seed", [(1.0, 0), (0.3, 1), (10.0, 2)])
def test_kv_interval_noise_scales(corpus, instance, eps, seed) -> None:
    inst = corpus.instance(instance)
    algo = get("mean", "kv_interval")()
    rng = RecordingGenerator(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = algo.run(inst.task_data(), inst.facts, eps, 1e-6, rng)
    assert out.released
    n = inst.facts.n
    rho = zcdp_rho(eps, 1e-6)
    v_share = algo.params["var_share"]
    dl = max(int(np.sum(np.asarray(out.details["half"]) > 0)), 1)
    normals = rng.of("normal")
    assert len(normals) == 2, "exactly the two Gaussian releases"
    second, first = normals
    sens_v = math.sqrt(dl) / n
    assert second.scale == pytest.approx(sens_v / math.sqrt(2.0 * v_share * rho), rel=1e-9)
    costs = {e[0]: e[1] for e in out.ledger}
    assert costs["clipped second moment"] == pytest.approx(v_share * rho, rel=1e-9)
    remaining = rho - sum(c for m, c in costs.items() if m != "clipped mean")
    assert costs["clipped mean"] == pytest.approx(remaining, rel=1e-9)
    sens_m = 2.0 * math.sqrt(dl) / n
    assert first.scale == pytest.approx(sens_m / math.sqrt(2.0 * remaining), rel=1e-9)
    assert sum(costs.values()) == pytest.approx(rho, rel=1e-9)
