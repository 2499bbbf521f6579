"""Committed notebooks are clean, well formed, and the self-study notebooks run."""

import ast
import re

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import assignments
from autograder.notebook_cells import nbgrader_meta, read
from conftest import REPO

NOTEBOOKS = sorted(p for folder in ("source", "release", "notebooks") for p in (REPO / folder).rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
ASSIGNMENTS = assignments.all_assignments()
# every function a learner writes, in any assignment: the student package must define none of them
LEARNER_FUNCTIONS = {name for assignment in ASSIGNMENTS.values() for name in assignment.reference}
SELF_STUDY = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_without_outputs_or_widget_state_and_with_python3_kernel(path):
    nb = read(path)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path}: run `jupyter nbconvert --clear-output`"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_source_metadata_is_consistent(name):
    assignment = ASSIGNMENTS[name]
    nb = read(REPO / "source" / name / assignment.notebook)
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c)]
    assert len(ids) == len(set(ids)), "duplicate grade_id"
    tests = [c for c in nb.cells if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]
    assert {nbgrader_meta(c)["grade_id"] for c in tests} == {step.grade_id for step in assignment.steps}
    for cell in tests:
        assert nbgrader_meta(cell)["points"] > 0 and nbgrader_meta(cell)["locked"]
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        assert hidden, "every autograder cell has hidden tests"
        assert cell.source.replace(hidden.group(0), "").strip(), "a visible part tells the learner what is graded"
    solutions = [c for c in nb.cells if nbgrader_meta(c).get("solution")]
    assert solutions
    for cell in solutions:
        assert "### BEGIN SOLUTION" in cell.source and "autograder" not in cell.source


def test_self_checks_know_every_course_function():
    from attention_lab.checks import COURSE_FUNCTIONS

    assert set(COURSE_FUNCTIONS) == LEARNER_FUNCTIONS


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


@pytest.mark.parametrize("name", SELF_STUDY)
def test_self_study_notebooks_execute(name):
    nb, errors = execute(REPO / "notebooks" / name)
    assert not errors, errors
    if name != "00_start_here.ipynb":
        assert len(widget_views(nb)) >= 1, "a self-study notebook shows its visual"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_source_notebook_executes_cleanly_with_its_visual_on_the_learners_functions(name):
    nb, errors = execute(REPO / "source" / name / ASSIGNMENTS[name].notebook)
    assert not errors, errors
    assert len(widget_views(nb)) >= 1
    assert not any(o.get("name") == "stderr" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
