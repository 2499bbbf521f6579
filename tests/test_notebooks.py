"""Committed notebooks are clean, well formed, and the self-study notebooks run."""

import ast
import re

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import assignments
from autograder.nbgrader.notebook_cells import nbgrader_meta, read
from conftest import ASSIGNMENT, REPO

NOTEBOOKS = sorted(p for folder in ("source", "release", "notebooks") for p in (REPO / folder).rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
ASSIGNMENTS = assignments.all_assignments()
# every function a learner writes, in any assignment: the student package must define none of them
LEARNER_FUNCTIONS = {name for assignment in ASSIGNMENTS.values() for name in assignment.reference}


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
    from attention_lab.a01_attention.checks import COURSE_FUNCTIONS

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


def execute(path, *extra_cells):
    nb = read(path)
    nb.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return nb, errors


#: A last cell that prints which of pyplot and the inline backend the notebook's kernel has imported.
LOADED_PLOTTING = ("import sys\n"
                   "print(sorted({'matplotlib.pyplot', 'matplotlib_inline.backend_inline'} & set(sys.modules)))")


def widget_views(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_source_notebook_executes_cleanly_with_its_visual_on_the_learners_functions(name):
    """Each source notebook's one execution per run: no cell raises, so every autograder cell passes — what
    `nbgrader validate` on the source says (tests/test_release.py relies on this) — and the visual is drawn."""
    nb, errors = execute(REPO / "source" / name / ASSIGNMENTS[name].notebook, LOADED_PLOTTING)
    assert not errors, errors
    tests = [c for c in nb.cells if nbgrader_meta(c).get("grade") and c.cell_type == "code"]
    assert tests and all(c.execution_count is not None for c in tests)
    assert len(widget_views(nb)) >= 1
    # every figure is shown, with its caption, without pyplot or its inline backend (which no cell needs: a kernel
    # that grades the notebook does not load them; the set-up cell has no `%matplotlib inline`)
    for cell in nb.cells:
        if cell.cell_type == "code" and "show_figure(" in cell.source:
            assert sum("<figure><img " in o.get("data", {}).get("text/html", "") for o in cell.outputs) == 1
    assert nb.cells[-1].outputs[0]["text"] == "[]\n", nb.cells[-1].outputs
    assert not any(o.get("name") == "stderr" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


# ---- issue 9 §5 and §8: a notebook with mistakes runs to the end; the texts say what grading does ------------

ASSIGNMENT_NOTEBOOKS = sorted(p for folder in ("source", "release") for p in (REPO / folder).glob("*/*.ipynb"))
POLICY = ("Each step is graded on its own: when a function you call from an earlier step is wrong or unfinished, "
          "the grader answers those calls with the reference's values, so one mistake costs points once.")


@pytest.mark.parametrize("path", ASSIGNMENT_NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_code_cell_but_the_setup_carries_raises_exception_so_run_all_goes_on(path):
    """JupyterLab sends such a cell with stop_on_error=False, nbclient does not stop at its error; nbgrader's
    Validate and autograde run every cell anyway (allow_errors), so grading and Validate do not change."""
    for cell in read(path).cells:
        if cell.cell_type == "code":
            tagged = "raises-exception" in cell.metadata.get("tags", [])
            assert tagged == (nbgrader_meta(cell).get("grade_id") != "setup"), (path.name, cell.source[:80])


def _words(text):
    return " ".join(text.split())


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_notebook_states_the_grading_policy_and_what_run_all_and_validate_do(name):
    nb = read(REPO / "source" / name / ASSIGNMENTS[name].notebook)
    texts = [_words(c.source) for c in nb.cells if c.cell_type == "markdown"]
    everything = " ".join(texts)
    assert POLICY in texts[0], "the introduction states the grading policy"
    done = next(t for t in texts if t.startswith("## Done?"))
    assert POLICY in done
    assert "Run All Cells*. It runs every cell to the end, also past a self-check that fails: every self-check " \
           "shows its verdict" in done
    assert "click **Validate**: it lists every cell whose check fails" in done
    for old in ("uses a correct version", "graded as if that earlier function", "graded given your earlier",
                "cannot stand in"):
        assert old not in everything, f"{name} still says {old!r}"


@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("name", sorted(set(ASSIGNMENTS) - {ASSIGNMENT}))
def test_run_all_on_a_release_with_a_known_mistake_runs_to_the_end_with_every_verdict_and_the_visual(name):
    """Assignment 1's (the ASSIGNMENT of conftest) is not run here: tests/test_browser.py runs that same notebook
    (its first mistake) with Run All in JupyterLab and asserts this on the notebook JupyterLab holds after it."""
    from self_check_harness import assert_ran_to_the_end_with_every_verdict_and_the_visual, first_mistake, release_with

    assignment = ASSIGNMENTS[name]
    nb = release_with(assignment, dict(assignment.mistakes[first_mistake(assignment)].cells))
    # nbclient's default (allow_errors=False) stops at the first error of a cell without the tag
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    assert_ran_to_the_end_with_every_verdict_and_the_visual(nb)


def test_the_readme_tells_students_what_run_all_and_validate_do():
    readme = " ".join((REPO / "README.md").read_text().split())
    students = readme[readme.index("## For students"):readme.index("## For self-study learners")]
    assert "it runs every cell to the end, also past a self-check that fails, so every self-check shows its " \
           "verdict" in students
    assert "click **Validate** in the notebook toolbar: it lists every cell whose check fails" in students
    assert "is not answered yet" in students and "names the argument you modified" in students
