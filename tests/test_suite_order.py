"""`make test` hands the longest modules out first (tests/conftest.py's MODULE_SECONDS; a module not measured yet
before the short ones), so that no pytest-xdist worker ends the run alone with a class to grade."""

import re
import types

import conftest
from conftest import LONGEST_FIRST, REPO


class _Item:
    def __init__(self, module: str, name: str):
        self.module = types.SimpleNamespace(__name__=f"tests.{module}")
        self.name = name
        self.markers = []

    def add_marker(self, marker):
        self.markers.append(marker.name)


def test_modules_go_out_longest_first_and_an_unmeasured_one_before_the_short_ones(monkeypatch):
    # pytest collects a module's tests together, modules in file order
    monkeypatch.setattr(conftest, "MODULE_SECONDS", {"test_grading": 300.0, "test_hub": 120.0,
                                                     "test_a_fast": 2.0, "test_z_fast": 2.0})
    names = [("test_a_fast", "a1"), ("test_a_fast", "a2"), ("test_grading", "g1"), ("test_grading", "g2"),
             ("test_hub", "h1"), ("test_new_assignment", "n1"), ("test_new_assignment", "n2"), ("test_z_fast", "z1")]
    items = [_Item(module, name) for module, name in names]
    conftest.pytest_collection_modifyitems(None, items)
    # a new module (not measured yet, a new assignment's say) is taken as UNMEASURED_SECONDS: after the long
    # modules, before the short ones, so that it does not end the run alone; equal seconds keep collection order
    assert conftest.MODULE_SECONDS["test_hub"] > conftest.UNMEASURED_SECONDS > conftest.MODULE_SECONDS["test_a_fast"]
    assert [item.name for item in items] == ["g1", "g2", "h1", "n1", "n2", "a1", "a2", "z1"]
    assert [item.name for item in items if item.markers == ["slow"]] == ["g1", "g2", "h1"]


def test_the_figures_are_seconds_of_existing_modules_and_the_longest_go_first():
    assert conftest.MODULE_SECONDS and conftest.MEASURED_ON
    assert all(isinstance(s, float) and s >= 0 for s in conftest.MODULE_SECONDS.values())
    assert [name for name in conftest.MODULE_SECONDS if not (REPO / "tests" / f"{name}.py").is_file()] == []
    assert LONGEST_FIRST[0] == "test_grading"  # the graded class: the run's longest module starts first
    # a new module goes out before most measured modules (UNMEASURED_SECONDS' promise): never in the run's tail
    shorter = [name for name, s in conftest.MODULE_SECONDS.items() if s < conftest.UNMEASURED_SECONDS]
    assert len(shorter) > 0.8 * len(conftest.MODULE_SECONDS)


def test_make_test_keeps_collection_order():
    makefile = (REPO / "Makefile").read_text()
    for target in ("test", "test-fast"):
        recipe = re.search(rf"^{re.escape(target)}:.*\n\t(.+)$", makefile, re.MULTILINE).group(1)
        # without it pytest-xdist reorders modules by their number of tests and ignores LONGEST_FIRST
        assert "--dist loadfile --no-loadscope-reorder" in recipe, target
