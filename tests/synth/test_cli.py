import json
import subprocess
import sys

import pandas as pd
import pytest

from dpstats.cli import main
from dpstats.synth.workload import paper_workload


def _run(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr()


@pytest.fixture()
def small(tmp_path):
    df = pd.DataFrame({"a": [1, 2, 3, 2] * 25, "b": list("xyxx") * 25})
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "s.toml"
    schema.write_text('label = "b"\n[columns.a]\ntype = "numeric"\nbounds = [0, 5]\ninteger = true\n'
                      '[columns.b]\ntype = "categorical"\nlevels = ["x", "y"]\n')
    return data, schema


def test_bench_on_a_file_never_seen(tmp_path, small, capsys):
    data, schema = small
    out = tmp_path / "out"
    code, io = _run(["synth", "bench", "--data", str(data), "--schema", str(schema), "--mechanism", "independent", "--epsilon", "1", "10",
                     "--trials", "2", "--out", str(out), "--no-progress"], capsys)
    assert code == 0, io.err
    res = pd.read_csv(out / "results.csv", keep_default_na=False, na_values=[""])
    runs, orig = res[res["mechanism"] == "independent"], res[res["mechanism"] == "original"]
    assert set(runs["metric"]) == {"ind", "pair", "coracc", "f1"}
    assert len(runs) == 2 * 2 * 4 and (res["status"] == "ok").all() and set(runs["discretizer"]) == {"privtree"}
    # the original data's row: scored as a table that is the data itself, and its held-out F1
    assert set(orig["metric"]) == {"ind", "pair", "coracc", "f1", "f1_heldout"} and orig["epsilon"].isna().all()
    assert (orig.set_index("metric").loc[["ind", "pair", "coracc"], "value"] == 1.0).all()
    summ = pd.read_csv(out / "summary.csv")
    assert set(summ["group"]) == {"Ind", "Pair", "Corr", "F1", "GT"} and set(summ["mechanism"]) == {"independent"}
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "correlation_d_eps1.png", "correlation_d_eps10.png", "marginals_d_eps1.png", "marginals_d_eps10.png",
        "metrics_d.png"]
    assert not (out / "discretizers.csv").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temp folder left


def test_bench_compares_the_discretizers(tmp_path, small, capsys):
    data, schema = small
    out = tmp_path / "out"
    code, io = _run(["synth", "bench", "--data", str(data), "--schema", str(schema), "--mechanism", "independent",
                     "--epsilon", "1", "--trials", "2", "--discretizer", "privtree", "equal_width", "--out", str(out),
                     "--no-progress"], capsys)
    assert code == 0, io.err
    res = pd.read_csv(out / "results.csv", keep_default_na=False, na_values=[""])
    runs = res[res["mechanism"] == "independent"]
    assert runs.groupby("discretizer").size().to_dict() == {"equal_width": 2 * 4, "privtree": 2 * 4}
    comp = pd.read_csv(out / "discretizers.csv")
    assert len(comp) == 4 and (comp[["trials_privtree", "trials_equal_width"]] == 2).all().all()
    means = runs.groupby(["metric", "discretizer"])["value"].mean().unstack()
    got = comp.set_index("metric")["difference"]
    assert (abs(got - (means["privtree"] - means["equal_width"]).reindex(got.index)) < 1e-12).all()
    # the ranking is the paper's discretiser's alone: one mechanism, four metric combinations
    summ = pd.read_csv(out / "summary.csv").set_index(["group", "mechanism"])
    assert summ.loc[("GT", "independent"), "combinations"] == 4
    assert {"discretizers_d.png", "metrics_d.png"} <= {p.name for p in (out / "figures").iterdir()}


@pytest.mark.parametrize("extra,words", [
    (["--mechanism", "nope"], "unknown mechanism 'nope'"),
    (["--label", "zz"], "column 'zz': the label is not a column"),
    (["--dataset", "car"], "argument --dataset: not allowed with argument --data"),
])
def test_bench_bad_input_exits_2_and_writes_nothing(tmp_path, small, extra, words):
    data, schema = small
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "dpstats", "synth", "bench", "--data", str(data), "--schema", str(schema),
            "--out", str(out), *extra]
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert not out.exists() and [x.name for x in tmp_path.iterdir()] == ["d.csv", "s.toml"]


def test_bench_unknown_dataset(tmp_path, capsys):
    code, io = _run(["synth", "bench", "--dataset", "car", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "unknown dataset 'car'" in io.err and not (tmp_path / "o").exists()


def test_run_and_its_errors(tmp_path, small, capsys):
    data, schema = small
    out = tmp_path / "syn.csv"
    code, io = _run(["synth", "run", "independent", "--data", str(data), "--schema", str(schema), "--epsilon", "1",
                     "--out", str(out)], capsys)
    assert code == 0, io.err
    assert json.loads(io.out)["schema_standard"] is True
    syn = pd.read_csv(out)
    assert syn.shape == (100, 2) and syn["a"].between(0, 5).all() and set(syn["b"]) <= {"x", "y"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[columns.a]\ntype = "numeric"\nbounds = [0, 2]\n')
    code, io = _run(["synth", "run", "independent", "--data", str(data), "--schema", str(bad), "--epsilon", "1",
                     "--out", str(tmp_path / "x.csv")], capsys)
    assert code == 2 and f"{data}: column 'a': value 3" in io.err and not (tmp_path / "x.csv").exists()
    code, io = _run(["synth", "run", "independent", "--data", str(tmp_path / "none.csv"), "--epsilon", "1",
                     "--out", str(tmp_path / "x.csv")], capsys)
    assert code == 2 and "none.csv: cannot read the data file" in io.err


def test_paper_workload():
    assert paper_workload(["a", "b", "y"], "y") == [("a", "y"), ("b", "y"), ("a", "b", "y")]
    assert len(paper_workload([f"c{i}" for i in range(17)], "c16")) == 16 + 16 * 15 // 2
    assert len(paper_workload([f"c{i}" for i in range(5)])) == 10
    with pytest.raises(KeyError):
        paper_workload(["a"], "z")


def test_run_without_schema_is_marked_non_standard(tmp_path, small, capsys):
    from dpstats.privacy.accounting import PrivacyLeakWarning

    data, _ = small
    with pytest.warns(PrivacyLeakWarning, match="read from the private data"):
        code, io = _run(["synth", "run", "independent", "--data", str(data), "--label", "b", "--epsilon", "1",
                         "--out", str(tmp_path / "s.csv")], capsys)
    assert code == 0 and json.loads(io.out)["schema_standard"] is False


@pytest.mark.filterwarnings("ignore::dpstats.privacy.accounting.PrivacyLeakWarning")
@pytest.mark.parametrize("schema_text,extra,words", [
    ('[columns.zz]\ntype = "numeric"\nbounds = [0, 5]\n', [],
     "d.csv: column 'zz': named in the schema"),
    ('[columns.b]\ntype = "categorical"\nlevels = ["x"]\n', [],
     "d.csv: column 'b': value 'y' (row 2) is not among the schema's levels"),
    ('[columns.a]\ntype = "numeric"\nbounds = [0, 2]\n', [],
     "d.csv: column 'a': value 3 (row 3) is outside the public bounds [0, 2]"),
    ('label = "a"\n[columns.a]\ntype = "numeric"\nbounds = [0, 5]\n', [],
     "s2.toml: column 'a': the label must be categorical"),
    ('[columns.a\ntype = ', [], "s2.toml: not valid TOML"),
    (None, ["--label", "zz"], "d.csv: column 'zz': the label is not a column of the data"),
    (None, ["--data-file-is-binary"], "bin.csv: cannot read the data file"),
])
def test_bad_input_one_message_naming_file_and_column(tmp_path, small, capsys, schema_text, extra, words):
    """Each case of the issue's "Bad input": exit 2, one line on stderr, no traceback, nothing in --out."""
    data, _ = small
    argv = ["synth", "bench", "--data", str(data), "--mechanism", "independent", "--trials", "1",
            "--epsilon", "1", "--out", str(tmp_path / "out"), "--no-progress"]
    if schema_text is not None:
        (tmp_path / "s2.toml").write_text(schema_text)
        argv += ["--schema", str(tmp_path / "s2.toml")]
    if extra == ["--data-file-is-binary"]:
        (tmp_path / "bin.csv").write_bytes(b"\x00\x01\xff\xfe garbage")
        argv[argv.index(str(data))] = str(tmp_path / "bin.csv")
        extra = []
    before = sorted(p.name for p in tmp_path.iterdir())
    code, io = _run(argv + extra, capsys)
    assert code == 2 and words in io.err, io.err
    assert len(io.err.strip().splitlines()) == 1 and "Traceback" not in io.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # nothing written, no temp folder left


def test_data_file_never_seen_anes96(tmp_path, capsys):
    """``--data FILE`` on a data set outside the corpus and the paper: ANES 1996 (statsmodels), codebook schema."""
    sm = pytest.importorskip("statsmodels.api")
    df = sm.datasets.anes96.load_pandas().data        # 944 rows; logpopul (derived) is not in the schema
    data = tmp_path / "anes96.csv"
    df.to_csv(data, index=False)
    cat = lambda lo, hi: "{ type = \"categorical\", levels = [" + ", ".join(str(i) for i in range(lo, hi + 1)) + "] }"
    schema = tmp_path / "anes96.toml"
    schema.write_text("\n".join([
        'label = "vote"', "[columns]",
        'popul = { type = "numeric", bounds = [0, 10000] }',          # census place population, 1000s
        'TVnews = { type = "numeric", bounds = [0, 7], integer = true }',  # days a week
        f"selfLR = {cat(1, 7)}", f"ClinLR = {cat(1, 7)}", f"DoleLR = {cat(1, 7)}", f"PID = {cat(0, 6)}",
        'age = { type = "numeric", bounds = [18, 100], integer = true }',
        f"educ = {cat(1, 7)}", f"income = {cat(1, 24)}", f"vote = {cat(0, 1)}", ""]))
    out = tmp_path / "out"
    code, io = _run(["synth", "bench", "--data", str(data), "--schema", str(schema), "--mechanism", "independent",
                     "privbayes", "--epsilon", "1", "--trials", "1", "--out", str(out), "--no-progress"], capsys)
    assert code == 0, io.err
    res = pd.read_csv(out / "results.csv")
    assert set(res["dataset"]) == {"anes96"} and (res["status"] == "ok").all()
    runs = res[res["mechanism"] != "original"]
    assert set(runs["metric"]) == {"ind", "pair", "coracc", "f1"} and res["value"].between(0, 1).all()
    assert set(runs["mechanism"]) == {"independent", "privbayes"}
    syn_out = tmp_path / "syn.csv"
    code, io = _run(["synth", "run", "privbayes", "--data", str(data), "--schema", str(schema), "--epsilon", "1",
                     "--out", str(syn_out)], capsys)
    assert code == 0, io.err
    syn = pd.read_csv(syn_out)
    assert list(syn.columns) == [c for c in df.columns if c != "logpopul"] and len(syn) == len(df)
    assert syn["income"].isin(range(1, 25)).all() and syn["age"].between(18, 100).all()


@pytest.mark.parametrize("content,words", [
    (b"", "empty.csv: empty file"),
    (b"\n  \n", "empty.csv: empty file"),
    (b"a,b\n", "empty.csv: empty file: a header and no rows"),
])
def test_empty_data_file_is_named(tmp_path, small, capsys, content, words):
    _, schema = small
    (tmp_path / "empty.csv").write_bytes(content)
    for argv in (["bench", "--mechanism", "independent", "--out", str(tmp_path / "out")],
                 ["run", "independent", "--epsilon", "1", "--out", str(tmp_path / "s.csv")]):
        code, io = _run(["synth", *argv, "--data", str(tmp_path / "empty.csv"), "--schema", str(schema)], capsys)
        assert code == 2 and words in io.err and len(io.err.strip().splitlines()) == 1, io.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "empty.csv", "s.toml"]


@pytest.mark.filterwarnings("ignore::dpstats.privacy.accounting.PrivacyLeakWarning")
def test_missing_numeric_value_names_the_column_and_the_rows(tmp_path, small, capsys):
    _, schema = small
    df = pd.DataFrame({"a": [1, None, 3, 2, None, None], "b": list("xyxxyx")})
    df.to_csv(tmp_path / "m.csv", index=False)
    for extra in (["--schema", str(schema)], ["--label", "b"]):          # a schema file, or one read from the data
        code, io = _run(["synth", "run", "independent", "--data", str(tmp_path / "m.csv"), "--epsilon", "1",
                         "--out", str(tmp_path / "s.csv"), *extra], capsys)
        assert code == 2 and "m.csv: column 'a': 3 rows with a missing value (first: row 2)" in io.err, io.err
        assert not (tmp_path / "s.csv").exists()


def test_param_sets_a_mechanism_hyperparameter(tmp_path, small, capsys):
    data, schema = small
    out = tmp_path / "out"
    code, io = _run(["synth", "bench", "--data", str(data), "--schema", str(schema), "--mechanism", "privbayes",
                     "--epsilon", "1", "--trials", "1", "--param", "privbayes.degree=1", "--param",
                     "privbayes.theta=5.0", "--out", str(out), "--no-progress"], capsys)
    assert code == 0, io.err
    assert (pd.read_csv(out / "results.csv")["status"] == "ok").all()
    code, io = _run(["synth", "run", "privbayes", "--data", str(data), "--schema", str(schema), "--epsilon", "1",
                     "--param", "privbayes.degree=1", "--out", str(tmp_path / "s.csv")], capsys)
    assert code == 0, io.err


@pytest.mark.parametrize("param,words", [
    ("nope.iters=5", "--param nope.iters=5: unknown mechanism 'nope' in a hyperparameter; known: independent, mst,"),
    ("mst.itres=5", "--param mst.itres=5: unknown hyperparameter 'itres' of mst; known: compress, iters"),
    ("mst.label=b", "unknown hyperparameter 'label' of mst"),
    ("aim.label=b", "--param aim.label=b: the label of aim is the schema's (give --label instead)"),
    ("mstiters=5", "--param mstiters=5: expected MECHANISM.NAME=VALUE"),
    ("aim.rounds=5", "--param aim.rounds=5: aim is not among the mechanisms run (mst)"),
])
def test_param_errors_name_the_valid_ones(tmp_path, small, capsys, param, words):
    data, schema = small
    for argv in (["bench", "--mechanism", "mst", "--out", str(tmp_path / "out")],
                 ["run", "mst", "--epsilon", "1", "--out", str(tmp_path / "s.csv")]):
        code, io = _run(["synth", *argv, "--data", str(data), "--schema", str(schema), "--param", param], capsys)
        assert code == 2 and words in io.err and len(io.err.strip().splitlines()) == 1, io.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "s.toml"]


def test_synth_trials_get_their_own_wall_clock(tmp_path, small):
    """Not the estimation benchmark's 60 s: the paper ran each synthesizer to completion."""
    from dpstats.bench.sandbox import DEFAULT_TIME_LIMIT
    from dpstats.bench.synth.benchmark import SYNTH_TIME_LIMIT
    from dpstats.cli import build_parser
    from dpstats.cli.synth import _limits

    data, schema = small
    base = ["synth", "bench", "--data", str(data), "--schema", str(schema), "--out", str(tmp_path / "o")]
    assert _limits(build_parser().parse_args(base))["time_limit"] == SYNTH_TIME_LIMIT > DEFAULT_TIME_LIMIT
    assert _limits(build_parser().parse_args(base + ["--time-limit", "5"]))["time_limit"] == 5.0
