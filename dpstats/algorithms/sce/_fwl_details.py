"""The keys of fwl_score's release details and why each may be published (public fact or paid statistic).

:data:`FWL_SCORE_DETAILS` is the allowlist that ``tests/algorithms/test_details_allowlist.py`` checks every
release against: a paid statistic names the ledger entries it is computed from.
"""

from __future__ import annotations

from dpstats.algorithms.sce._fwl_nuisance import STAGE1_DETAILS

__all__ = ["FWL_SCORE_DETAILS"]

#: the keys of :func:`~dpstats.algorithms.sce.fwl_score.fwl_score_release`'s details and why each is public
FWL_SCORE_DETAILS = {
    **STAGE1_DETAILS,
    "theta0": "paid statistic: pilot from the `Gaussian Gram of (1, controls, x, y)` (or the `Gaussian within pair "
              "scatter of (controls, x, y)`)",
    "unshrunk": "paid statistic: theta0 + S / T from `Gaussian sums of clip(u) clip(v), clip(u)^2` (within pairs: "
                "`Gaussian sum of clip(u) clip(v)`, `Gaussian sum of clip(u)^2`)",
    "noise_sd": "paid statistic: a function of `Gaussian sums of clip(u) clip(v), clip(u)^2` (within pairs: "
                "`Gaussian sum of clip(u) clip(v)`, `Gaussian sum of clip(u)^2`) and their noise scales",
    "scales_ok": "paid statistic: a test on `grid quantile (row norm)`, `grid quantile |u|`, `|v|` (or B_u, B_v; with an "
                 "absorbed fixed effect `grid quantile (pair difference norm)`, `grid quantile |u_i - u_j|`, `|v_i - v_j|`)",
    "C_u": "paid statistic: `grid quantile |u|` (or `grid quantile |u_i - u_j|`) times c_u (and, row level, the public "
           "clip_widening factor), at most B_u (B_u alone for a public 0/1 column)",
    "C_v": "paid statistic: `grid quantile |v|` (or `grid quantile |v_i - v_j|`) times c_v, at most B_v (B_v alone for a public 0/1 outcome)",
    "B_u": "paid statistic: largest |u| under the public bounds, given `Gaussian Gram of (1, controls, x, y)` and "
           "the private `grid median` locations and scales (inf without bounds)",
    "B_v": "paid statistic: largest |v| under the public bounds, given `Gaussian Gram of (1, controls, x, y)` and "
           "the private `grid median` locations and scales (inf without bounds)",
    "sigma_S": "paid statistic: 2 C_u C_v / sqrt(2 rho_S), times the joint factor of `Gaussian sums of clip(u) "
               "clip(v), clip(u)^2` on the row path (3 C_u C_v with an absorbed fixed effect; times sqrt(J) for the "
               "total of J group sums), from `grid quantile |u` and `grid quantile |v` (or the bounds)",
    "sigma_T": "paid statistic: C_u^2 / sqrt(2 rho_T), times the same joint factor on the row path (1.5 C_u^2 with "
               "an absorbed fixed effect, sqrt(2) C_u^2 for "
               "sums per group of clusters at row level; times sqrt(J) for the total of J group sums), from "
               "`grid quantile |u` (or the bound B_u)",
    "absorbed_levels": "public fact: levels of the categorical term absorbed (0: none), from the design's column "
                       "names",
    "private_columns": "public fact: number of columns standardised privately (those without public bounds)",
    "cluster_count": "paid statistic: `Gaussian count of clusters` (clustered sampling whose clusters are not the "
                     "absorbed levels)",
}
