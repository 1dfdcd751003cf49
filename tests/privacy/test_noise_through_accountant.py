"""Every noise draw in the package goes through an accountant's charging call.

A static scan of ``dpstats/`` (outside ``dpstats/privacy/``, where the charging
calls live): a call of a noise distribution (``normal``, ``laplace``, ``gumbel``,
...) on anything but an accountant, and any direct charge (``spend*``), must be
in :data:`ALLOWED` with the reason it is not a privacy draw outside a charging
call. A new ``rng.normal(0, sigma)`` beside a separate ``acc.spend_gaussian`` --
the pattern that let the drawn and the charged sigma drift apart -- fails here.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "dpstats"
NOISE = {"normal", "standard_normal", "laplace", "gumbel", "exponential", "standard_exponential",
         "multivariate_normal", "standard_cauchy", "standard_t", "logistic", "standard_gamma", "gamma"}
SPEND = {"spend", "spend_pure", "spend_rho", "spend_gaussian"}
ACCOUNTANT_NAMES = {"acc", "accountant", "self.acc", "self.accountant"}

#: (file, enclosing function) -> why this draw is not privacy noise outside a charging call
ALLOWED: dict[tuple[str, str], str] = {
    ("algorithms/linreg/tukeyem.py", "sample_depth_region"):
        "the restricted exponential mechanism's sampler, run only inside acc.measurement in _tukey",
    ("algorithms/linreg/tukeyem.py", "_tukey"):
        "the PTR draw of tukeyem_refcode, inside the lambda handed to acc.measurement",
    ("algorithms/mean/bhs_affine.py", "BHSAffine._run.ptr_release"):
        "the BHS test-and-release, the function handed to acc.measurement",
    ("synth/discretize.py", "privtree_edges"):
        "PrivTree's noisy counts, run only inside acc.measurement in PrivTree.edges",
    ("algorithms/linreg/ssp_bootstrap.py", "parametric_bootstrap"):
        "the parametric bootstrap simulates the released noise: post-processing of a release, no data",
    ("algorithms/sce/_fwl_nuisance.py", "nuisance_spread"):
        "simulates the released Gram's noise from its public scale to size the interval: post-processing",
    ("synth/mechanisms/fem.py", "FEM._synthesize.ftpl"):
        "follow-the-perturbed-leader on the privately selected queries and public cells: post-processing",
    ("audit/neighbours.py", "generated"): "generates the audit's synthetic base data set (not a release)",
    ("audit/neighbours.py", "_rows"): "draws the rows of the audit's generated designs (not a release)",
    ("synth/mechanisms/ron_gauss.py", "RONGauss._synthesize"):
        "samples synthetic rows from the released Gaussian model (post-processing)",
    ("ols/r_engine.py", "_match_columns"): "a fixed probe vector matching R's columns to Python's (not a release)",
    ("synth/mechanisms/_torch.py", "DPDiscriminatorStep.__call__"):
        "DP-SGD's per-step noise, run only inside acc.rdp_measurement (dpstats.privacy.rdp.RDPAccountant) in DPGAN and DP-CTGAN",
}


def _calls():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("privacy/"):
            continue
        stack: list[str] = []
        found = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                stack.append(node.name)
                self.generic_visit(node)
                stack.pop()

            visit_AsyncFunctionDef = visit_FunctionDef
            visit_ClassDef = visit_FunctionDef

            def visit_Call(self, node):
                f = node.func
                if isinstance(f, ast.Attribute) and (f.attr in NOISE or f.attr in SPEND):
                    found.append((rel, ".".join(stack) or "<module>", f.attr, ast.unparse(f.value), node.lineno))
                self.generic_visit(node)

        Visitor().visit(ast.parse(path.read_text(), filename=str(path)))
        yield from found


def test_no_noise_drawn_or_charged_outside_the_charging_calls():
    bad = []
    for rel, func, attr, receiver, line in _calls():
        if attr in NOISE and receiver in ACCOUNTANT_NAMES:
            continue  # acc.laplace / acc.exponential: the charging calls themselves
        if attr in SPEND and not rel.startswith("privacy/"):
            bad.append(f"{rel}:{line} {receiver}.{attr}: a direct charge, not a charging call")
            continue
        if (rel, func) not in ALLOWED:
            bad.append(f"{rel}:{line} {receiver}.{attr} in {func}: noise drawn outside a charging call")
    assert not bad, "\n".join(bad)


def test_every_allowance_is_still_needed():
    used = {(rel, func) for rel, func, attr, receiver, _ in _calls()
            if attr in NOISE and receiver not in ACCOUNTANT_NAMES}
    assert set(ALLOWED) <= used, sorted(set(ALLOWED) - used)
