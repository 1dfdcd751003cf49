"""Audit every standard algorithm of the roster at one epsilon and write the table for the docs.

Usage (from the repository root)::

    nice -n 10 .venv/bin/python benchmarks/audit_roster.py                    # epsilon = 1, 10000 releases each
    .venv/bin/python benchmarks/audit_roster.py --only ssp adaptive_clip --trials 2000
    nice -n 10 .venv/bin/python benchmarks/audit_roster.py --sensitivity-only  # smallest violation caught

Writes ``docs/audit_table.inc`` (the roster table, included by ``docs/audit.md``),
``docs/audit_sensitivity.inc`` (how small a violation the audit catches) and the
full results as JSON (``--json``). Each audit uses ``dpstats.audit.audit`` with
its defaults (generated data, n = 1000, both designs, confidence 0.95), except
where an algorithm needs another data set to release at all (listed in the
table's notes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpstats.algorithms import list_configurations  # noqa: E402
from dpstats.algorithms.mean.adaptive import AdaptiveClip  # noqa: E402
from dpstats.audit import audit, gaussian_power  # noqa: E402

#: data sets an algorithm needs to release at all (it declines on the default one), and slower ones' trials
OVERRIDES: dict[tuple[str, str], dict] = {
    ("sce", "noisystats"): {"regressors": 1},
    ("sce", "theilsen_match"): {"regressors": 1},
    ("sce", "theilsen_wide"): {"regressors": 1},
    ("sce", "tukeyem"): {"n": 4000, "trials": 4000},
    ("linreg", "tukeyem"): {"n": 4000, "trials": 4000},
    # bhs_affine declines unless n >= 20 k lambda_0 (k = 98 at epsilon = 1, delta = 1e-6): n = 122 700 is the
    # smallest that passes for d = 1; on a grid of 5 values its distinct-row computations are cheap, and a release
    # takes about 0.25 s (np.unique's sort of the n rows)
    ("mean", "bhs_affine"): {"n": 123000, "columns": 1, "levels": 5, "trials": 2000},
    # the slower opt-in synthesizers, audited in the mean task at the release counts their time allows (seconds per
    # release on the generated data, n = 1000, three columns, two idle cores: AIM 0.2, FEM 5, DPGAN 0.02,
    # DP-CTGAN 0.1-0.5, PATE-GAN 4-5, PATE-CTGAN 16); PATE-CTGAN is capped at 3 student-teacher iterations (a
    # public hyperparameter: the vote noise is then set so that the 3 iterations spend the whole budget)
    ("mean", "synth_aim"): {"trials": 2000},
    ("mean", "synth_fem"): {"trials": 200},
    ("mean", "synth_dpgan"): {"trials": 2000},
    ("mean", "synth_dpctgan"): {"trials": 2000},
    ("mean", "synth_pategan"): {"trials": 200},
    ("mean", "synth_patectgan"): {"trials": 400, "params": {"max_iterations": 3}},
}
# the same opt-in synthesizers with a regression on top (sce, linreg): fewer releases than in the mean task, as
# the regression's data have more columns to synthesize and both tasks together must fit in about an hour on one
# worker; at these counts the audit rules out gross failures only (its power is stated with each row)
for _task in ("sce", "linreg"):
    OVERRIDES.update({
        (_task, "synth_mst"): {"trials": 250},
        (_task, "synth_mwem_pgm"): {"trials": 500},
        (_task, "synth_rap"): {"trials": 250},
        (_task, "synth_aim"): {"trials": 500},
        (_task, "synth_fem"): {"trials": 150},
        (_task, "synth_dpgan"): {"trials": 1000},
        (_task, "synth_dpctgan"): {"trials": 1000},
        (_task, "synth_pategan"): {"trials": 150},
        (_task, "synth_patectgan"): {"trials": 150, "params": {"max_iterations": 3}},
    })

ESTIMATORS = ("clopper_pearson", "one_run", "zcdp", "gdp")


def _row(r) -> dict:
    best = {e: max((b["epsilon"] for b in r.bounds if b["estimator"] == e), default=0.0) for e in ESTIMATORS}
    counted = {e: any(b["counts"] for b in r.bounds if b["estimator"] == e) for e in ESTIMATORS}
    released = sum(o["released"] + o.get("fallback", 0) for design in r.outcomes.values() for o in
                   (design.values() if isinstance(next(iter(design.values())), dict) else [design]))
    e = r.errors
    return {"task": r.task, "algorithm": r.algorithm, "epsilon": r.epsilon_claimed, "delta": r.delta, "bounds": best,
            "counted": counted, "designs": r.power.get("designs"),
            "epsilon_lower": r.epsilon_lower, "confidence": r.confidence, "trials": r.trials, "seconds": r.seconds,
            "violation": r.violation, "reasons": r.reasons, "released": released, "errors": e["count"],
            "declined": e.get("declined", 0), "timeouts": e.get("timeouts", 0), "memory": e.get("memory", 0),
            "worker_deaths": e.get("worker_deaths", 0), "outcomes": r.outcomes, "ledger": r.ledger["summary"],
            "notes": r.notes}


def _designs(r: dict) -> int:
    """Designs an audit ran: saved with the row, else from its outcomes (kept per design when merged), else 2.

    The roster audits generated data with both designs (``audit``'s default); rows saved before the count
    was stored have it in their outcomes, or not at all.
    """
    if r.get("designs"):
        return int(r["designs"])
    o = r.get("outcomes") or {}
    if o:
        first = next(iter(o.values()))
        return len(o) if isinstance(first, dict) and isinstance(next(iter(first.values())), dict) else 1
    return 2


def _power(r: dict) -> float:
    """The bound an ideal attack typically reaches with the row's trials on a mechanism at the claim."""
    counted = sum(bool(v) for v in r["counted"].values()) or 2
    return gaussian_power(r["epsilon"], r.get("delta", 1e-6), r["trials"], r["confidence"], counted, _designs(r))


def _fmt(v: float, counted: bool) -> str:
    s = "inf" if v == float("inf") else f"{v:.3f}"
    return s if counted else f"({s})"


def roster_table(rows: list[dict], command: str) -> str:
    out = [
        "<!-- generated by benchmarks/audit_roster.py; do not edit -->",
        "",
        f"Command: `{command}`",
        "",
        "| task | algorithm | claimed ε | CP | one-run | zCDP | GDP | ε lower | power | confidence | trials | released | time (s) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rerun: dict[str, list[str]] = {}
    for r in rows:
        b, c = r["bounds"], r["counted"]
        verdict = "**violation**: " + "; ".join(r["reasons"]) if r["violation"] else "no violation found"
        if r.get("setting"):
            verdict += f" ({r['setting']})"
        if r["released"] == 0:
            verdict += "; declined in every run"
        if r.get("command") and r["command"] != command:
            rerun.setdefault(r["command"], []).append(f"`{r['algorithm']}` ({r['task']})")
        out.append(f"| {r['task']} | `{r['algorithm']}` | {r['epsilon']:g} | {_fmt(b['clopper_pearson'], c['clopper_pearson'])} | "
                   f"{_fmt(b['one_run'], c['one_run'])} | {_fmt(b['zcdp'], c['zcdp'])} | {_fmt(b['gdp'], c['gdp'])} | "
                   f"{r['epsilon_lower']:.3f} | {_power(r):.3f} | {r['confidence']:g} | {r['trials']} | {r['released']} | "
                   f"{r['seconds']:.0f} | {verdict} |")
    out += ["", "Bounds in parentheses do not count for this algorithm's ledger (information only): zCDP counts for a "
            "ledger in rho, GDP for one in mu^2. Each column is the larger of the two designs (mirror, inside). "
            "**power** is the lower bound an ideal threshold attack typically reaches with the same releases, designs "
            "and confidence on a mechanism that spends exactly the claim (the Gaussian mechanism that is exactly "
            "(ε, δ)-DP; `dpstats.audit.power`): an ε lower below it is what the audit could show, not evidence "
            "of privacy.", ""]
    out += [f"Rows of {', '.join(names)} regenerated with `{cmd}`.\n" for cmd, names in rerun.items()]
    return "\n".join(out)


def _scaled(factor: float) -> type:
    class Scaled(np.random.Generator):
        def __init__(self, rng):
            super().__init__(rng.bit_generator)

        def normal(self, loc=0.0, scale=1.0, size=None):
            return super().normal(loc, np.asarray(scale) * factor, size)

    class ClipScaled(AdaptiveClip):
        name = f"adaptive_clip_sigma_x{factor:g}"

        def _run(self, data, facts, epsilon, delta, rng):
            return super()._run(data, facts, epsilon, delta, Scaled(rng))

    return ClipScaled


def sensitivity(trials: int, workers: int | None, seed: int, factors=(0.1, 0.5, 0.6, 0.7)) -> tuple[list[dict], str]:
    rows = []
    for f in (1.0,) + tuple(factors):
        cls = AdaptiveClip if f == 1.0 else _scaled(f)
        r = audit(cls, epsilon=1.0, trials=trials, design="mirror", workers=workers, seed=seed)
        rows.append({"factor": f, **_row(r)})
        print(f"  sigma x {f:g}: epsilon_lower {r.epsilon_lower:.3f}, violation {r.violation} ({r.seconds:.0f} s)",
              flush=True)
    lines = ["<!-- generated by benchmarks/audit_roster.py; do not edit -->", "",
             f"Command: `.venv/bin/python benchmarks/audit_roster.py --sensitivity-only --sensitivity-trials {trials}`",
             "", "`adaptive_clip` (mean, public bounds: one Gaussian mechanism) with its noise multiplied by a factor, "
             "audited at claimed ε = 1 (δ = 1e-6) with the mirror design:", "",
             "| σ factor | true ε at δ = 1e-6 | CP | one-run | zCDP | ε lower | trials | time (s) | flagged |",
             "|---|---|---|---|---|---|---|---|---|"]
    from dpstats.audit.bounds import epsilon_from_gdp
    from dpstats.privacy.accounting import zcdp_rho

    mu_claim = (2 * zcdp_rho(1.0, 1e-6)) ** 0.5
    for r in rows:
        b = r["bounds"]
        true_eps = epsilon_from_gdp(mu_claim / r["factor"], 1e-6)
        lines.append(f"| {r['factor']:g} | {true_eps:.2f} | {b['clopper_pearson']:.3f} | {b['one_run']:.3f} | "
                     f"{b['zcdp']:.3f} | {r['epsilon_lower']:.3f} | {r['trials']} | {r['seconds']:.0f} | "
                     f"{'yes' if r['violation'] else 'no'} |")
    lines += ["", "The true ε is that of the Gaussian mechanism actually run (its ledger charges the honest ρ, "
              "which is ε = 1).", ""]
    return rows, "\n".join(lines)


def _pair_rho(x1, y1, x2, y2, sxx: float, sxy: float) -> float:
    """zCDP rho of ssp's joint Gaussian release of (upper triangle of X'X, X'y) between two rows."""
    iu = np.triu_indices(len(x1))
    dG = (np.outer(x1, x1) - np.outer(x2, x2))[iu]
    db = np.asarray(x1) * y1 - np.asarray(x2) * y2
    return float((dG @ dG / sxx**2 + db @ db / sxy**2) / 2.0)


def missing_term(trial_counts, workers: int | None, seed: int) -> tuple[list[dict], str]:
    """``ssp`` calibrated without its X'y term: the audit at several sizes, and its true privacy loss."""
    import itertools

    from dpstats.algorithms.linreg.ssp import SSP
    from dpstats.audit.neighbours import generated
    from dpstats.privacy.accounting import zcdp_epsilon
    from tests.audit_broken import SSPMissingTerm

    nb = generated("linreg", n=1000, seed=seed, design="mirror")
    grid = [np.array([1.0, a, b]) for a in np.linspace(-1, 1, 9) for b in np.linspace(-1, 1, 9)]
    ys = np.linspace(-1, 1, 5)
    facts = []
    for cls in (SSP, SSPMissingTerm):
        out = cls().run(nb.base, nb.facts, 1.0, 1e-6, np.random.default_rng(0))
        sxx, sxy = out.details["sigma_xx"], out.details["sigma_xy"]
        charged = sum(e[1] for e in out.ledger)
        worst = max(_pair_rho(x1, y1, x2, y2, sxx, sxy)
                    for (x1, y1), (x2, y2) in itertools.product(itertools.product(grid, ys), repeat=2))
        pair = _pair_rho(nb.neighbour.X[nb.row], nb.neighbour.y[nb.row], nb.base.X[nb.row], nb.base.y[nb.row], sxx, sxy)
        facts.append((cls.name, sxx, sxy, charged, worst, pair))
    rows = []
    for t in trial_counts:
        r = audit(SSPMissingTerm, task="linreg", epsilon=1.0, trials=t, design="mirror", workers=workers, seed=seed)
        rows.append({"trials": t, **_row(r)})
        print(f"  ssp missing X'y term, {t} releases: epsilon_lower {r.epsilon_lower:.3f}, violation {r.violation} "
              f"({r.seconds:.0f} s)", flush=True)
    lines = ["<!-- generated by benchmarks/audit_roster.py; do not edit -->", "",
             "Command: `.venv/bin/python benchmarks/audit_roster.py --missing-term-only --missing-term-trials "
             + " ".join(str(t) for t in trial_counts) + "`", "",
             "`ssp` (linreg) on the generated mirror pair (n = 1000, ε = 1, δ = 1e-6) and the same calibrated without "
             "the X'y term of its joint sensitivity. The Gaussian release of (X'X, X'y) costs ρ = Δ²/2 between two "
             "rows; the worst pair is searched on a grid of rows in the public box:", "",
             "| variant | σ_XX | σ_Xy | ρ charged | ρ, worst pair (ε) | ρ, audit's pair (ε) |", "|---|---|---|---|---|---|"]
    for name, sxx, sxy, charged, worst, pair in facts:
        lines.append(f"| `{name}` | {sxx:.2f} | {sxy:.2f} | {charged:.5f} | {worst:.5f} ({zcdp_epsilon(worst, 1e-6):.2f}) | "
                     f"{pair:.5f} ({zcdp_epsilon(pair, 1e-6):.2f}) |")
    lines += ["", "The audit of the variant (mirror design, released solve):", "",
              "| trials | CP | one-run | zCDP | GDP (info) | ε lower | time (s) | flagged |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["bounds"]
        lines.append(f"| {r['trials']} | {b['clopper_pearson']:.3f} | {b['one_run']:.3f} | {b['zcdp']:.3f} | "
                     f"{b['gdp']:.3f} | {r['epsilon_lower']:.3f} | {r['seconds']:.0f} | {'yes' if r['violation'] else 'no'} |")
    lines.append("")
    return rows, "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--tasks", nargs="+", default=["sce", "linreg", "mean"])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="audit only these algorithms")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "docs" / "audit_table.inc"))
    ap.add_argument("--json", default=str(ROOT / "docs" / "audit_roster.json"))
    ap.add_argument("--sensitivity-out", default=str(ROOT / "docs" / "audit_sensitivity.inc"))
    ap.add_argument("--sensitivity-trials", type=int, default=20000)
    ap.add_argument("--sensitivity-only", action="store_true", help="only the smallest-violation sweep")
    ap.add_argument("--no-sensitivity", action="store_true", help="skip the smallest-violation sweep")
    ap.add_argument("--missing-term-out", default=str(ROOT / "docs" / "audit_missing_term.inc"))
    ap.add_argument("--missing-term-trials", type=int, nargs="+", default=[20000, 50000, 100000])
    ap.add_argument("--missing-term-only", action="store_true", help="only the ssp missing-X'y-term audit")
    ap.add_argument("--resume", action="store_true", help="reuse audits saved in <json>.partial.json by an earlier run")
    ap.add_argument("--table-only", action="store_true", help="rewrite the table from the saved JSON; audit nothing")
    args = ap.parse_args(argv)

    if args.table_only:
        saved = json.loads(Path(args.json).read_text())
        skipped = [f"`{name}` ({task}): not audited: {kw['skip']}." for (task, name), kw in OVERRIDES.items()
                   if "skip" in kw and task in args.tasks]
        Path(args.out).write_text(roster_table(saved["roster"], saved["command"]) + "".join(f"\n{x}\n" for x in skipped))
        return 0

    results: dict = {}
    if args.missing_term_only:
        mrows, text = missing_term(args.missing_term_trials, args.workers, args.seed)
        Path(args.missing_term_out).write_text(text)
        results["missing_term"] = mrows
        args.sensitivity_only = args.no_sensitivity = True  # nothing else
    if not args.sensitivity_only:
        rows = []
        argv_s = " ".join(a for a in (argv if argv is not None else sys.argv[1:]) if a != "--resume")
        command = f".venv/bin/python benchmarks/audit_roster.py {argv_s}".strip()
        t0 = time.perf_counter()
        partial = Path(args.json).with_suffix(".partial.json")
        done = json.loads(partial.read_text()) if args.resume and partial.exists() else {}
        skipped: list[str] = []
        for task in args.tasks:
            # opt-in algorithms (slow synthesize-then-estimate) are audited when named with --only
            for entry in list_configurations(task, "standard", opt_in=bool(args.only)):
                if args.only and entry.name not in args.only:
                    continue
                kw = dict(OVERRIDES.get((task, entry.name), {}))
                if "skip" in kw:
                    print(f"{task} {entry.name}: not audited ({kw['skip']})", flush=True)
                    skipped.append(f"`{entry.name}` ({task}): not audited: {kw['skip']}.")
                    continue
                trials = min(kw.pop("trials", args.trials), args.trials)
                print(f"{task} {entry.name} ({trials} releases{', ' + str(kw) if kw else ''})", flush=True)
                key = f"{task}/{entry.name}/{args.epsilon:g}/{trials}/{args.seed}"
                if key in done:
                    rows.append(done[key])
                    print("  (resumed)", flush=True)
                    continue
                # the roster's table is made with the mirror and inside designs (the audit's default before the
                # design search), so that its rows stay comparable and a rerun reproduces them
                r = audit(entry.name, task=task, epsilon=args.epsilon, trials=trials, workers=args.workers,
                          seed=args.seed, **{"design": "both", **kw})
                row = _row(r)
                row["setting"] = ", ".join(f"{k} = {v}" for k, v in kw.items())
                rows.append(row)
                done[key] = row
                partial.write_text(json.dumps(done, indent=1, default=float))
                print(f"  epsilon_lower {r.epsilon_lower:.3f}, violation {r.violation}, {r.seconds:.0f} s", flush=True)
        print(f"roster: {time.perf_counter() - t0:.0f} s")
        for row in rows:
            row.setdefault("command", command)
        main_command = command
        if args.only:  # replace these rows in the saved roster; the other rows keep the command that made them
            try:
                saved = json.loads(Path(args.json).read_text())
            except (OSError, ValueError):
                saved = {}
            old_rows = saved.get("roster", [])
            main_command = saved.get("command", ".venv/bin/python benchmarks/audit_roster.py")
            new = {(r["task"], r["algorithm"]): r for r in rows}
            merged = [new.pop((r["task"], r["algorithm"]), r) for r in old_rows]
            for r in merged:
                r.setdefault("command", main_command)
            order = {(t, c.name): i for i, (t, c) in enumerate((t, c) for t in ("sce", "linreg", "mean")
                                                                for c in list_configurations(t, "standard", opt_in=True))}
            rows = sorted(merged + list(new.values()), key=lambda r: order.get((r["task"], r["algorithm"]), 1 << 30))
            results["command"] = main_command
        else:
            results["command"] = command
        Path(args.out).write_text(roster_table(rows, main_command) + "".join(f"\n{x}\n" for x in skipped))
        results["roster"] = rows
    if not args.no_sensitivity:
        srows, text = sensitivity(args.sensitivity_trials, args.workers, args.seed)
        Path(args.sensitivity_out).write_text(text)
        results["sensitivity"] = srows
    if args.json:
        old = {}
        p = Path(args.json)
        if p.exists():
            try:
                old = json.loads(p.read_text())
            except ValueError:
                old = {}
        old.update(results)
        p.write_text(json.dumps(old, indent=1, default=float))
        # the saved progress of an interrupted run is not needed once the results are written
        p.with_suffix(".partial.json").unlink(missing_ok=True)
    return 1 if any(r["violation"] for r in results.get("roster", [])) else 0


if __name__ == "__main__":
    sys.exit(main())
