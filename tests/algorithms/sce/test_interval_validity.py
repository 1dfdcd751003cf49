"""fwl_score's interval on corpus designs where it used to miss, as the coverage benchmark draws them.

Each trial resamples the instance (``resample(instance, s)``) and releases
with the API's ``interval_params`` and ``default_rng(s)``, as
``dpstats bench --inference`` does. fair78_affairs (a zero-inflated outcome)
covered its population coefficient on 6 of 20 draws at epsilon 1 when the
outcome residual was clipped at its quantile (``c_v = 1``); abadie03_401k
(heavy-tailed assets and income) gave intervals narrower than OLS's that
missed on 3 of 10 draws at epsilon 3. grogger91 (a sparse bounded control
whose private scale failed) released a finite interval 7.7 non-private SEs
from its population coefficient at epsilon 1. papke95 (a match rate with a
long right tail, participation that levels off at 100 %) covered 32 of 40
draws at epsilon 1 while the |u| clip sat at the quantile the exponential
mechanism can locate (``u_beyond = 0``). papke05_pooled (six year dummies floored
in the noisy Gram) missed by 7-12 non-private SEs at every epsilon, and lmb04_fullpoly (collinear
polynomial controls under the same floor) covered 2 of 40 draws at epsilon 3; a failed outcome
clip on papke05_pooled released 4.1e5 with a "significant" interval at epsilon 10.

The draws here were found and measured before the interval configuration released each column's count of
non-zero pair differences (``nonzero_share``), whose draws and budget move every later draw: they run with
``nonzero_share = 0`` (:data:`BEFORE_COUNTS`), which reproduces them. The counts' own rule is tested in
``test_calibration_sparse_scale.py``.
"""

from __future__ import annotations

import math

from dpstats.algorithms.sce.fwl_score import FWLScore
from tests.algorithms.draws import interval_releases, truth


#: the interval configuration as these draws were measured: without the counts of non-zero pair differences
BEFORE_COUNTS = {"nonzero_share": 0.0}
#: ... and as it is released, for draws measured after the counts
AS_RELEASED = {"nonzero_share": FWLScore.interval_params["nonzero_share"]}


def _intervals(iid: str, eps: float, seeds, **override):
    out = []
    for rel in interval_releases("sce", "fwl_score", iid, eps, seeds, **{**BEFORE_COUNTS, **override}):
        lo, hi = rel.conf_int(0.95)
        out.append((float(lo[0]), float(hi[0]), rel.details["interval_check"]))
    return float(truth(iid)[0]), out


def test_fair78_covers_at_epsilon_1():
    """Measured 20 of 20 (width 2.2x the non-private one); 6 of 20 with c_v = 1. Of draws 0-11, draw 2 is
    infinite (its ``|u|`` clip landed 80 times too wide: "denominator is noise")."""
    truth, ivs = _intervals("fair78_affairs", 1.0, range(12))
    covered = sum(lo <= truth <= hi for lo, hi, _ in ivs)
    assert sum(math.isfinite(hi - lo) for lo, hi, _ in ivs) >= 11
    assert covered >= 11
    _, narrow = _intervals("fair78_affairs", 1.0, range(12), c_v=1.0)
    assert sum(lo <= truth <= hi for lo, hi, _ in narrow) <= 8  # the control: the quantile clip misses


def test_abadie03_401k_heavy_tails_give_no_finite_miss():
    """At epsilon 3 every interval is infinite, by the count of rows far beyond the clips (measured 20 of 20)."""
    truth, ivs = _intervals("abadie03_401k", 3.0, range(4))
    assert all(check == "far beyond the clips" and math.isinf(hi - lo) for lo, hi, check in ivs)
    assert not any(math.isfinite(hi - lo) and not lo <= truth <= hi for lo, hi, _ in ivs)


def test_grogger91_failed_sparse_scale_gives_no_finite_interval():
    """Draw 6 at epsilon 1: ``ptime86`` (96 % zeros, bounds [0, 12]) got the private scale 6.4e-9.

    Its range then spans about 2e9 scales (``failed standardisation (range)``): the interval must be
    infinite. With the check off (through ``plaus_hi``) the interval was the finite [0.16, 0.70], which
    misses the population value -0.15; since the controls enter the residuals clipped, as the Gram saw
    them, the count of rows far beyond the clips makes it infinite too. The point release is the same
    either way. (``plaus_grid`` locates the clips on ``[plaus_lo, plaus_hi]``, so the checks are switched
    off with the full grid of the clips, as they were measured.)
    """
    truth, ivs = _intervals("grogger91", 1.0, [6])
    lo, hi, check = ivs[0]
    assert check == "failed standardisation (range)" and math.isinf(hi - lo)
    _, off = _intervals("grogger91", 1.0, [6], plaus_hi=1e12, plaus_grid=False)
    lo_off, hi_off, check_off = off[0]
    assert check_off == "far beyond the clips" and math.isinf(hi_off - lo_off)
    (a,) = interval_releases("sce", "fwl_score", "grogger91", 1.0, [6], plaus_grid=False, **BEFORE_COUNTS)
    (b,) = interval_releases("sce", "fwl_score", "grogger91", 1.0, [6], plaus_hi=1e12, plaus_grid=False,
                             **BEFORE_COUNTS)
    assert float(a.estimate[0]) == float(b.estimate[0])


def test_papke95_widened_clip_covers_at_epsilon_1():
    """The draws that missed with the clip at the located quantile (4, 9, 19, 24, 28, 30 of 0-39) now cover.

    With ``u_beyond = 0`` about 20 % of rows lie beyond the |u| clip at epsilon 1 and the clipped score
    estimates the slope of the moderate match rates (mean 8.7 over 40 draws against the population 5.5);
    the clip widened to leave 5 % beyond covers 38 of 40 (measured), with a narrower median interval.
    """
    seeds = [4, 9, 19, 24, 28, 30]
    truth, ivs = _intervals("papke95", 1.0, seeds)
    assert all(math.isfinite(hi - lo) for lo, hi, _ in ivs)
    assert sum(lo <= truth <= hi for lo, hi, _ in ivs) >= 5
    # the control: the clip at the located quantile pulls the estimate up. Since the constant is partialled
    # out exactly (no longer under the eigenvalue floor), these draws' intervals with u_beyond = 0 cover too
    # (wider), but their centres sit 1.2 higher on average (measured 7.5 against 6.3, population 5.5)
    mid = [(lo + hi) / 2 for lo, hi, _ in ivs]
    _, narrow = _intervals("papke95", 1.0, seeds, u_beyond=0.0)
    assert sum((lo + hi) / 2 for lo, hi, _ in narrow) / 6 > sum(mid) / 6 + 0.5


def test_papke05_pooled_year_effects_are_absorbed():
    """Pooled OLS with six year dummies: the noisy Gram floored them and the estimate kept the year trend.

    With the year term in the Gram (``absorb_sole = 0``) every draw's estimate lies near the slope
    without year effects (about 30 at epsilon 1 against the population 8.4) inside a finite interval
    that misses it: 1 of 40 draws covered at epsilon 1, 0 of 40 at epsilon 3 and 10 (measured). The
    sole categorical term is now absorbed by within-year pair differences: 37 of 40 draws cover at
    epsilon 3 (measured), 5 of these 6. The study clusters by district; the draws here treat the rows as
    independent (``independent``), as they were measured, since the district jackknife's wider interval
    (``test_calibration_cluster_labels.py``) covers with the year trend in the estimate too.
    """
    truth, ivs = _intervals("papke05_pooled", 3.0, range(6), independent=True)
    assert all(math.isfinite(hi - lo) for lo, hi, _ in ivs)
    assert sum(lo <= truth <= hi for lo, hi, _ in ivs) >= 5
    # the control: the year term in the Gram keeps the year trend in the estimate (interval centres 14-25
    # for 8.4, measured; 3 of 6 cover since the constant is partialled out exactly, none before), with the
    # |u| clip as it was measured (u_clip_growth = 0; with the grown clip draw 1's centre is 7.3)
    _, pooled = _intervals("papke05_pooled", 3.0, range(6), independent=True, absorb_sole=0, u_clip_growth=0.0)
    assert all(math.isfinite(hi - lo) and (lo + hi) / 2 > truth + 4.0 for lo, hi, _ in pooled)
    assert sum(lo <= truth <= hi for lo, hi, _ in pooled) <= 3


def test_lmb04_fullpoly_floor_bias_is_inside_the_interval():
    """A global quadratic RD with interactions: collinear controls whose directions the floor shrank.

    With the eigenvalue floor at 4 noise units (the point default) the estimate sat near 31 for a
    population 18.1 at epsilon 3, inside intervals that covered 2 of 40 draws (measured); the bias
    vanishes as epsilon grows (18.5 at epsilon 1e4), so it is the floor's, not the clipping's. Above
    epsilon 1 the interval configuration floors at 2 units (``ridge_above_1``), where the simulated
    nuisance error sees most of it: 36 of 40 cover (measured), 5 of these 6.
    """
    truth, ivs = _intervals("lmb04_fullpoly", 3.0, range(6))
    assert sum(lo <= truth <= hi for lo, hi, _ in ivs) >= 5
    _, floor4 = _intervals("lmb04_fullpoly", 3.0, range(6), ridge_above_1=0.0)
    assert sum(lo <= truth <= hi for lo, hi, _ in floor4) <= 1  # the control


def test_papke05_pooled_failed_outcome_clip_gives_no_finite_interval():
    """Draw 2 at epsilon 10: the within |v_i - v_j| quantile landed 7.6e5 outcome scales out.

    The noise and the estimate were then of that size too, and the interval excluded 0 by a 2.2 sd
    noise draw: 4.1e5 with [4.3e4, 7.8e5] for a population 8.4 (measured). A ``v`` clip above
    ``plaus_hi`` scales now counts as a failed standardisation: 0 released, infinite interval. The
    control (the bar out of reach) is that confident miss. Measured on the full grid of the clips, with
    independent rows, as then; with ``plaus_grid`` (the interval configuration) the clip cannot land
    above ``plaus_hi`` at all, and the draw's interval covers.
    """
    truth, ivs = _intervals("papke05_pooled", 10.0, [2], independent=True, plaus_grid=False)
    lo, hi, check = ivs[0]
    assert check == "failed standardisation (scales)" and math.isinf(hi - lo)
    _, off = _intervals("papke05_pooled", 10.0, [2], independent=True, plaus_grid=False, plaus_hi=1e12)
    lo_off, hi_off, _ = off[0]
    assert math.isfinite(hi_off - lo_off) and lo_off > 1e3 * truth
    _, now = _intervals("papke05_pooled", 10.0, [2])
    assert now[0][0] <= truth <= now[0][1]


def test_grogger91_control_with_a_failed_scale_is_coarsened_not_extrapolated():
    """Draws 1 and 31 at epsilon 1 (release seeds [1, 99] and [31, 99], from a 40-draw scan).

    ``ptime86`` (95 % zeros, bounds [0, 12]) got a private scale 470 and 38 times too small, so its non-zero
    values stood 50-600 scales out, far beyond ``col_clip``. The Gram saw them clipped; the residuals used
    them unclipped, and the projection on the clipped column, extrapolated that far, made ``u`` and ``v`` of
    those 5 % of rows huge: each added a full ``C_u C_v`` to the score. The intervals [0.41, 1.29] and
    [0.29, 1.07] missed the population value -0.15 by 12 non-private SEs (confident misses; measured). The
    controls now enter the residuals as the Gram saw them (clipped): both intervals cover. (On the full
    grid of the clips, as measured: ``plaus_grid`` maps the clip draws to other cells.)
    """
    truth, ivs = _intervals("grogger91", 1.0, [1, 31], rng_key=99, plaus_grid=False)
    assert all(math.isfinite(hi - lo) and lo <= truth <= hi for lo, hi, _ in ivs)


def test_caschools_intercept_is_never_floored():
    """caschools_str (score on class size, no controls, n = 420) at epsilon 1, draws 22, 24, 29, 30.

    The noise floor of the Gram's eigenvalues (4 sigma sqrt(p + 1), about 1,100) exceeded the constant's
    exact diagonal n = 420, so the constant's direction was floored: the centring of ``u`` and ``v``
    shrank to 40 % and the finite intervals on these draws missed the population value -2.28 (4 of 10
    finite ones over draws 0-39; measured). The constant is now partialled out exactly, never floored.
    """
    truth, ivs = _intervals("caschools_str", 1.0, [22, 24, 29, 30])
    assert all(lo <= truth <= hi for lo, hi, _ in ivs)
    (rel,) = interval_releases("sce", "fwl_score", "caschools_str", 1.0, [22], **BEFORE_COUNTS)
    assert rel.details["floored_directions"] == 0


def test_hmda_sw_full_binary_regressor_gets_a_finite_interval_that_covers():
    """A public 0/1 regressor (``black``) and outcome (``deny``): at epsilon 1 the residual bound was about 3.

    It added ``|gamma_k|`` times the column clip for every control, and the noise of ``T`` (which
    scales with its square) drowned ``T`` on 9 of draws 0-9 ("denominator is noise"). With the
    projection clipped to ``[-0.25, 1.25]`` the bound is 1.25: measured 10 of 10 finite, all covering.
    """
    truth, ivs = _intervals("hmda_sw_full", 1.0, range(6))
    assert sum(math.isfinite(hi - lo) for lo, hi, _ in ivs) >= 5
    assert all(lo <= truth <= hi for lo, hi, _ in ivs)
    # the control: the bound from the controls, left unclipped as it was then (clip_free_max 4; at 2 a private
    # clip below that bound keeps most of these intervals finite too)
    _, wide = _intervals("hmda_sw_full", 1.0, range(6), proj_margin=math.inf, clip_free_max=4.0)
    assert sum(math.isfinite(hi - lo) for lo, hi, _ in wide) <= 2


def test_clip_quantiles_on_the_plausible_range_rescue_failed_scales():
    """At epsilon 1 the ``|u|`` clip of nsw_cps_raw draws 1 and 23 landed outside [1e-3, 1e3].

    On the full grid [1e-10, 1e10] the cells outside the plausible range, where a clip fails the
    standardisation anyway, held most of the exponential mechanism's mass at the small budget of the
    clip quantiles; the release was 0 with an infinite interval ("failed standardisation (scales)").
    On the plausible range (``plaus_grid``) both intervals are finite and cover.
    """
    # (star_g1 draw 3 was the other case until fwl_score's refined location changed its stage-2 budget)
    for iid, seed in (("nsw_cps_raw", 1), ("nsw_cps_raw", 23)):
        truth, ((lo, hi, check),) = _intervals(iid, 1.0, [seed])
        assert check == "ok" and lo <= truth <= hi, (iid, lo, hi, check)
        _, ((lo, hi, check),) = _intervals(iid, 1.0, [seed], plaus_grid=False)
        assert check == "failed standardisation (scales)" and math.isinf(hi - lo), (iid, check)


def _covered(iid: str, eps: float, seeds, **override) -> tuple[int, int]:
    """(finite, covering) intervals of the interval configuration as released, with its counts of non-zero
    pair differences (``override`` on top)."""
    truth, ivs = _intervals(iid, eps, seeds, **{**AS_RELEASED, **override})
    return sum(math.isfinite(hi - lo) for lo, hi, _ in ivs), sum(lo <= truth <= hi for lo, hi, _ in ivs)


def test_engel_food_grown_clip_covers_at_epsilon_10():
    """An Engel curve (food on income, n = 235): the |u| clip at the located quantile missed on 9 of 40 draws.

    Income has a long right tail and food spending flattens at high incomes, so the clipped score
    estimates a steeper slope than least squares (0.54 with exact sums at the clip, against 0.485): a
    bias of about 1.8 non-private SEs, outside intervals about 2.5 times as wide as OLS's. With the clip
    grown by ``min(2, sqrt(rho n) / 9)`` (2 here: ``u_clip_growth``) 37 of 40 draws covered (measured; 36 since
    the tighter sensitivities of the score sums narrowed the intervals).
    """
    fin, cov = _covered("engel_food", 10.0, range(40))
    assert fin >= 36 and cov >= 35  # measured 38 finite, 36 covering
    # the control: the clip as located (measured 31 of 40 covering, 39 finite)
    fin0, cov0 = _covered("engel_food", 10.0, range(40), u_clip_growth=0.0)
    assert fin0 >= 36 and cov0 <= 33
