"""Where a release's randomness comes from.

A release's noise must be secret: by default it is drawn from fresh operating
system entropy. A ``seed`` makes the release reproducible by anyone who knows
it (the noise can then be subtracted), so it is for teaching and tests only
and passing one warns.

``secure=True`` draws the Gaussian and Laplace noise through OpenDP's vetted
samplers instead of numpy's floating-point ones (see :doc:`/privacy`).
"""

from __future__ import annotations

import warnings

import numpy as np

from dpstats.privacy.accounting import PrivacyLeakWarning

__all__ = ["release_generator"]


def release_generator(seed: int | None = None, *, secure: bool = False) -> np.random.Generator:
    """The random generator of one release.

    Parameters
    ----------
    seed : int or None
        ``None`` (the default) draws fresh entropy from the operating system.
        An integer makes the release reproducible and warns with
        :class:`~dpstats.privacy.accounting.PrivacyLeakWarning`.
    secure : bool
        Draw Gaussian and Laplace noise with OpenDP's samplers.

    Returns
    -------
    numpy.random.Generator
    """
    if seed is not None:
        warnings.warn(
            "a fixed seed makes the release reproducible: anyone who knows the seed can remove the noise. "
            "Keep it secret, and use seed=None (the default) for anything you publish.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    if secure:
        raise NotImplementedError("secure=True is not available yet")
    return np.random.default_rng(seed)
