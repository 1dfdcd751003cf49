"""The package's import graph: no module imports one that imports it back, imports inside functions included.

The layer contracts (import-linter, ``scripts/lint.sh``) order the packages;
this checks every pair of modules, so that a circle inside one layer (which
the layer contracts cannot see) fails too.
"""

import pytest


def test_no_import_cycle_anywhere_in_the_package():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dpstats", cache_dir=None)
    mods = sorted(graph.modules)
    assert len(mods) > 100
    cycles = [(a, b) for a in mods for b in sorted(graph.find_modules_directly_imported_by(a))
              if graph.chain_exists(importer=b, imported=a)]
    assert not cycles, cycles


def test_the_check_sees_an_import_inside_a_function(tmp_path, monkeypatch):
    grimp = pytest.importorskip("grimp")
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circ import b\n")
    (pkg / "b.py").write_text("def f():\n    from circ import a\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circ", cache_dir=None)
    assert graph.chain_exists(importer="circ.b", imported="circ.a")
    assert graph.chain_exists(importer="circ.a", imported="circ.b")
