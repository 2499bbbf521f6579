"""Committed notebooks are clean, well formed, and the self-study notebooks run."""

import ast
import re

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.notebook_cells import nbgrader_meta, read
from conftest import REPO, SOURCE_NB

NOTEBOOKS = sorted(p for folder in ("source", "release", "notebooks") for p in (REPO / folder).rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
LEARNER_FUNCTIONS = {"softmax", "attention_scores", "causal_mask", "scaled_dot_product_attention",
                     "causal_self_attention", "attention_entropy"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_without_outputs_or_widget_state_and_with_python3_kernel(path):
    nb = read(path)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path}: run `jupyter nbconvert --clear-output`"


def test_source_metadata_is_consistent():
    nb = read(SOURCE_NB)
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c)]
    assert len(ids) == len(set(ids)), "duplicate grade_id"
    tests = [c for c in nb.cells if nbgrader_meta(c).get("grade")]
    assert len(tests) == 7
    for cell in tests:
        points = nbgrader_meta(cell)["points"]
        assert points > 0
        assert f"points={points}," in cell.source.replace(" ", "").replace("points=", "points=") or \
            re.search(rf"points={points}\b", cell.source), f"{nbgrader_meta(cell)['grade_id']}: helper points != cell points"
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        assert hidden, "every autograder cell has hidden tests"
        visible = cell.source.replace(hidden.group(0), "")
        assert "checks.expect_shapes(" in visible, "the visible part must fail on the release stub"
    solutions = [c for c in nb.cells if nbgrader_meta(c).get("solution")]
    assert {nbgrader_meta(c)["grade_id"] for c in solutions} == LEARNER_FUNCTIONS
    for cell in solutions:
        assert "### BEGIN SOLUTION" in cell.source and "autograder" not in cell.source


def test_student_package_has_no_reference_implementation():
    for path in (REPO / "attention_lab").rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert not defined & LEARNER_FUNCTIONS, f"{path} defines {defined & LEARNER_FUNCTIONS}"
        imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        for node in imports:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n.startswith("autograder") for n in names), f"{path} imports the grader"


def test_start_page_links_point_at_existing_notebooks():
    text = "\n".join(c.source for c in read(REPO / "notebooks" / "00_start_here.ipynb").cells)
    links = re.findall(r"\]\(([^)]+\.ipynb)\)", text)
    assert links
    for link in links:
        target = (REPO / "notebooks" / link).resolve()
        if target.parts[len(REPO.parts)] == "workspace":  # made by `make lab` from release/
            target = REPO / "release" / target.relative_to(REPO / "workspace")
        assert target.exists(), link


def execute(path):
    nb = read(path)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return nb, errors


def widget_views(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


@pytest.mark.parametrize("name", ["00_start_here.ipynb", "01_attention_explorer.ipynb"])
def test_self_study_notebooks_execute(name):
    nb, errors = execute(REPO / "notebooks" / name)
    assert not errors, errors
    if name == "01_attention_explorer.ipynb":
        assert len(widget_views(nb)) == 1


def test_source_notebook_executes_cleanly_with_the_explorer_on_the_learners_functions():
    nb, errors = execute(SOURCE_NB)
    assert not errors, errors
    assert len(widget_views(nb)) == 1
    assert not any(o.get("name") == "stderr" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
