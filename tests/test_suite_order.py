"""`make test` hands the longest modules out first (tests/conftest.py's LONGEST_FIRST), so that neither
pytest-xdist worker ends the run alone with a class to grade."""

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


def test_the_listed_modules_come_first_in_their_order_and_the_rest_keep_theirs():
    # pytest collects a module's tests together, modules in file order
    names = [("test_a_fast", "a1"), ("test_a_fast", "a2"), ("test_grading", "g1"), ("test_grading", "g2"),
             ("test_hub", "h1"), ("test_parallel_grading", "p1"), ("test_z_fast", "z1")]
    items = [_Item(module, name) for module, name in names]
    conftest.pytest_collection_modifyitems(None, items)
    assert [item.name for item in items] == ["g1", "g2", "p1", "h1", "a1", "a2", "z1"]
    assert [item.name for item in items if item.markers == ["slow"]] == ["g1", "g2", "p1", "h1"]


def test_every_listed_module_exists_once_and_make_test_keeps_collection_order():
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if not (REPO / "tests" / f"{name}.py").is_file()] == []
    makefile = (REPO / "Makefile").read_text()
    for target in ("test", "test-fast"):
        recipe = re.search(rf"^{re.escape(target)}:.*\n\t(.+)$", makefile, re.MULTILINE).group(1)
        # without it pytest-xdist reorders modules by their number of tests and ignores LONGEST_FIRST
        assert "--dist loadfile --no-loadscope-reorder" in recipe, target
