import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpstats.privacy.accounting import PrivacyLeakWarning
from dpstats.synth.schema import Schema, SchemaError, level_key, level_keys, read_table


def test_shipped_schemas_validate_the_full_files():
    from dpstats.synth.datasets import load_dataset

    for name, n, d in [("bank", 45211, 17), ("shopping", 12330, 18)]:
        df, schema = load_dataset(name)
        assert df.shape == (n, d) and schema.standard and schema.label in df.columns


def test_toml_and_json_round_trip(tmp_path, bank):
    _, schema = bank
    schema.write_json(tmp_path / "s.json")
    again = Schema.from_file(tmp_path / "s.json")
    assert again.columns == schema.columns and again.label == schema.label


@pytest.mark.parametrize("edit,column,words", [
    (lambda d: d["columns"].pop("age"), "age", "not a column of the data"),
    (lambda d: d["columns"]["job"].update(levels=["admin."]), "job", "not among the schema's levels"),
    (lambda d: d["columns"]["balance"].update(bounds=[0, 100]), "balance", "outside the public bounds"),
])
def test_bad_values_name_file_and_column(tmp_path, bank, edit, column, words):
    df, schema = bank
    raw = schema.to_dict()
    edit(raw)
    data = df.drop(columns=["age"]) if column == "age" else df
    if column == "age":
        raw["columns"]["age"] = {"type": "numeric", "bounds": [0, 100]}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(raw))
    s = Schema.from_file(path)
    with pytest.raises(SchemaError) as err:
        s.validate(data, file="data.csv")
    msg = str(err.value)
    assert msg.startswith("data.csv: ") and f"column {column!r}" in msg and words in msg


def test_schema_file_errors(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('label = "z"\n[columns.x]\ntype = "numeric"\nbounds = [0, 1]\n')
    with pytest.raises(SchemaError, match=r"s.toml: column 'z': the label is not a column"):
        Schema.from_file(p)
    p.write_text('[columns.x]\ntype = "numeric"\nbounds = [2, 1]\n')
    with pytest.raises(SchemaError, match=r"column 'x': bounds must be finite with lo <= hi"):
        Schema.from_file(p)
    p.write_text("[columns\n")
    with pytest.raises(SchemaError, match="not valid TOML"):
        Schema.from_file(p)
    with pytest.raises(SchemaError, match="cannot read the schema file"):
        Schema.from_file(tmp_path / "missing.toml")


def test_schema_from_data_warns_and_is_non_standard():
    df = pd.DataFrame({"x": [1.5, 2.0, 9.0], "c": ["a", "b", "a"]})
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        s = Schema.from_data(df, label="c")
    assert not s.standard and s["x"].bounds == (1.5, 9.0) and s["c"].levels == ("a", "b")


def test_integer_codes_and_booleans_match_levels():
    s = Schema.from_dict({"columns": {"k": {"type": "categorical", "levels": [1, 2]},
                                      "b": {"type": "categorical", "levels": [False, True]}}})
    df = pd.DataFrame({"k": [1.0, 2.0], "b": ["TRUE", "false"]})
    assert s.validate(df).shape == (2, 2)



@pytest.mark.parametrize("values,dtype", [
    ([True, 1, 1.0, "1", "true", None, np.nan, 2, True], object),
    (["a", None, "1", "a", "TRUE", None], "str"),
    (["a", None, "1", "a", "TRUE", None], "string"),
    ([1.0, -0.0, 0.0, np.nan, 2.5, 1.0, np.nan], "float64"),
    ([3, 1, 3, -2], "int64"),
    ([True, False, True], "bool"),
    ([1, None, 2, 1], "Int64"),
    (["x", "y", "x", None], "category"),
])
def test_level_keys_are_the_keys_of_every_value(values, dtype):
    s = pd.Series(values, dtype=dtype)
    inverse, keys = level_keys(s)
    assert [keys[i] for i in inverse] == list(s.map(level_key))

def test_read_table_errors(tmp_path):
    p = tmp_path / "x.csv"
    p.write_bytes(b"\x00\xff\xfe garbage")
    with pytest.raises(SchemaError, match="x.csv"):
        read_table(p)
    with pytest.raises(SchemaError, match="cannot read the data file"):
        read_table(tmp_path / "nope.csv")
    q = tmp_path / "ok.csv"
    pd.DataFrame({"a": np.arange(3), "b": list("xyz")}).to_csv(q, index=False)
    assert read_table(q).shape == (3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_table(q).columns.tolist() == ["a", "b"]


def test_schema_from_a_corpus_manifest_synthesizes_its_data():
    from dpstats.data.corpus import Corpus
    from dpstats.synth.mechanisms.independent import Independent
    from dpstats.synth.pipeline import synthesize_frame

    corpus = Corpus.public()
    spec = corpus.spec("mean_abadie03_401k")
    schema = Schema.from_bounds(spec.bounds, integer=["e401k"], source=str(spec.manifest))
    assert schema.names == ("e401k", "p401k") and schema.standard
    df = corpus.frame(spec.study, spec.dataset)
    res = synthesize_frame(df, schema, Independent(), 1.0, 1e-9, np.random.default_rng(0))
    assert res.frame.shape == (len(df), 2) and set(res.frame["e401k"]) <= {0, 1}
    assert abs(res.frame["e401k"].mean() - df["e401k"].mean()) < 0.05
    with pytest.raises(SchemaError, match="column 'inc': no public bounds"):
        Schema.from_bounds(spec.bounds, order=["e401k", "inc"], source=str(spec.manifest))
