"""benchmarks/interval_checks.py: the interval checks of each draw, counted per instance and per band of n."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, load_script


def _module():
    return load_script(REPO / "benchmarks" / "interval_checks.py")


def test_counts_add_up_and_match_the_rows(tmp_path, capsys):
    """engel_food at epsilon 1 fails its standardisation on most draws; hmda_sw_full is finite with proj_margin."""
    ic = _module()
    out = tmp_path / "rows.json"
    assert ic.main(["--epsilon", "1", "--draws", "3", "--instance", "engel_food", "hmda_sw_full",
                    "--workers", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    rows = json.loads(out.read_text())
    assert len(rows) == 6 and {r["instance"] for r in rows} == {"engel_food", "hmda_sw_full"}
    header = text[1].split(",")
    per = {line.split(",")[0]: line.split(",") for line in text[2:4]}
    for iid, cells in per.items():
        # finite plus every check's count is the number of draws
        assert int(cells[2]) + sum(int(c) for c in cells[3:]) == 3
        mine = [r for r in rows if r["instance"] == iid]
        assert int(cells[2]) == sum(r["finite"] for r in mine)
        for name, c in zip(header[3:], cells[3:], strict=True):
            assert int(c) == sum((not r["finite"]) and r["check"] == name for r in mine)
    assert int(per["engel_food"][2]) == 0 and int(per["hmda_sw_full"][2]) >= 2
    assert text[-1].startswith("all: 6 draws")


def test_a_malformed_param_names_itself():
    ic = _module()
    with pytest.raises(SystemExit):
        ic.main(["--param", "proj_margin", "--instance", "engel_food"])
