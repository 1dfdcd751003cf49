"""benchmarks/informative_table.py: the quick-preset tables of docs/benchmark/informative.md come from its command."""

from __future__ import annotations

from tests.conftest import REPO, load_script

PAGE = REPO / "docs" / "benchmark" / "informative.md"


def _module():
    return load_script(REPO / "benchmarks" / "informative_table.py")


def test_every_table_row_printed_from_the_committed_csvs_is_on_the_page(capsys):
    """The page's quick-preset tables are the script's output on the committed ratio and coverage tables."""
    assert _module().main([]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    targets = [r for r in rows if r.startswith("| sce: best standard")]
    assert len(targets) == 1 and "[ratios](ratios_public_quick.csv)" in targets[0]
    # the targets table, the table per task and epsilon and the bands of n: a header, a rule and rows each
    assert len(rows) > 25
    page = PAGE.read_text(encoding="utf-8")
    missing = [r for r in rows if r not in page]
    assert not missing, f"rows printed by benchmarks/informative_table.py but not on {PAGE.name}: {missing}"


def test_another_ratio_table_is_named_in_the_source_column(tmp_path, capsys):
    """With --ratios the source column names that file, not the committed quick table."""
    mod = _module()
    other = tmp_path / "ratios_other.csv"
    other.write_bytes(mod.RATIOS.read_bytes())
    assert mod.main(["--ratios", str(other)]) == 0
    out = capsys.readouterr().out
    assert "`ratios_other.csv`" in out and "[ratios](ratios_public_quick.csv)" not in out
    assert mod.main(["--ratios", str(other), "--ratio-source", "full preset"]) == 0
    assert "| full preset |" in capsys.readouterr().out
