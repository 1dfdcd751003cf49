"""The plain-language account of a release: :meth:`PrivateResult.interpretation <dpstats.api.result.PrivateResult.interpretation>`.

What epsilon and delta promise the people in the data, what the method took as public, whether the
number is an estimate or a fallback, and what its interval covers; read from the result's public
fields only.
"""

from __future__ import annotations

from typing import Any

from dpstats.api.words import _fmt, _promise

__all__ = ["interpretation_text"]


def interpretation_text(res: Any) -> str:
    """The paragraphs of :meth:`PrivateResult.interpretation <dpstats.api.result.PrivateResult.interpretation>`.

    ``res`` is the :class:`~dpstats.api.result.PrivateResult` (untyped here: this module is imported by that
    one, and the import graph has no cycle).
    """
    paras = [_promise(float(res.epsilon), float(res.delta), res.n, res.interpretation_class, res.method)]
    ub = res._user_bounds()
    assumed = (
        f"The method treated as public, without spending privacy: the number of rows (n = {res.n}), "
        f"the number of columns (d = {res.d}), the names of the variables"
    )
    if res.task != "mean" and res.weights:
        assumed += (", the model formula and the name of the weights column; the weights themselves are "
                    "private: the method saw each row multiplied by the square root of its weight, so no "
                    "range of a column (not even the intercept's or a dummy's) was taken as public")
    elif res.task != "mean":
        assumed += ", the model formula, that the intercept is 1 and that dummy columns are 0 or 1"
    if ub:
        assumed += ", and the ranges you declared (" + "; ".join(
            f"{k} in [{_fmt(lo)}, {_fmt(hi)}]" for k, (lo, hi) in ub.items()) + "). "
        assumed += "Values outside a declared range were clipped to it, which can bias the estimate."
    else:
        assumed += ". You declared no ranges, so the method spent part of the budget finding the scale of the data."
    if res.levels:
        assumed += (" The levels you declared (" + "; ".join(
            f"{k} in {{{', '.join(str(v) for v in lv)}}}" for k, lv in res.levels.items())
            + ") fix the dummy columns, whatever levels the data hold.")
    if res.levels_from_data:
        assumed += (" The levels of " + ", ".join(res.levels_from_data) + " were read from the data: which "
                    "levels are present, and which dummy columns were dropped as empty or collinear, are "
                    "treated as public without spending privacy (declare them with levels= to avoid this).")
    assumed += " Which rows have missing values is also treated as public (those rows were dropped)."
    paras.append(assumed)
    if res.seeded:
        paras.append("This release was made with a fixed seed, so its noise is a known function of the seed: "
                     "whoever knows the seed and the other rows can remove the noise and recover a person's "
                     "values. Such a release is for teaching and tests only; publish only a release made "
                     "without a seed.")
    if res.declined and not res.ledger:
        paras.append("Nothing was released. The decline follows a public rule (on n, the number of released "
                     "quantities and epsilon): it reveals nothing about the data, and no budget was spent.")
    elif res.declined:
        paras.append("Nothing was released. The decline itself was computed within the same budget.")
    else:
        fresh = "" if res.seeded else ", and the noise is drawn afresh from the operating system at every call"
        fb = res._fallback_set()
        if fb:
            one = len(fb) == 1
            paras.append(
                f"{res._fallback_subject()} not estimated: {'it is' if one else 'they are'} what the method "
                f"releases when it cannot estimate {'it' if one else 'them'}, so do not report "
                f"{'it' if one else 'them'} as {'an estimate' if one else 'estimates'}.")
        if len(fb) < len(res.terms):
            paras.append(
                "The released number is the estimate plus deliberate random noise: it is not the non-private "
                f"estimate{fresh}. Running again and averaging or choosing among the results spends the budget "
                "again each time (the epsilons add up), so publish one release."
            )
        else:
            paras.append("Running again draws fresh noise and spends the budget again each time (the epsilons "
                         "add up).")
    what = "mean" if res.task == "mean" else "coefficient"
    fb = res._fallback_set()
    if res.has_interval and fb:
        paras.append(f"The release carries the method's standard error and interval for "
                     f"{', '.join(fb)}, but {'that value was' if len(fb) == 1 else 'those values were'} not "
                     f"estimated (a fallback), so they are not a confidence interval for the population {what}"
                     f"{'' if len(fb) == 1 else 's'}: "
                     "do not publish them as one.")
    if res.has_interval and len(fb) < len(res.terms):
        para = (f"The standard error and the confidence interval are for the population {what}, not for the "
                f"non-private estimate on these rows: they cover {res._covers()}. "
                "They are computed from the released statistics and the public facts only, within the same budget.")
        if res._cluster_robust():
            pass
        elif res.task != "mean" and res._robust():
            para += (" If the study reports clustered standard errors, this interval does not account for "
                     "clustering and may be too narrow.")
        elif res.task != "mean":
            para += (" If the study reports heteroskedasticity-robust or clustered standard errors, this interval "
                     "accounts only for classical sampling error and may be too narrow.")
        paras.append(para)
    reason = res.uninformative_reason
    if reason is not None:
        paras.append(f"Uninformative: {reason}")
    return "\n\n".join(paras)
