"""release/ is what `make release` generates from source/, and nothing secret reaches it."""

import re

import nbformat
import pytest

from autograder.nbgrader.grading import copy_course, run_nbgrader
from autograder.nbgrader.notebook_cells import read
from autograder.nbgrader.release import generate_release
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB

ASSIGNMENTS = sorted(p.name for p in (REPO / "source").iterdir() if p.is_dir())


def course_copy(tmp_path):
    return copy_course(REPO, tmp_path)


def test_committed_release_is_fresh(tmp_path):
    course = course_copy(tmp_path / "course")
    fresh = tmp_path / "fresh"
    generate_release(course, ASSIGNMENTS, release_dir=fresh)
    committed = sorted(p.relative_to(REPO / "release") for p in (REPO / "release").rglob("*") if p.is_file())
    generated = sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    assert committed == generated, "release/ has different files than source/ generates: run `make release`"
    for relative in generated:
        assert (REPO / "release" / relative).read_bytes() == (fresh / relative).read_bytes(), (
            f"release/{relative} is stale: run `make release` and commit the result")


def test_release_holds_only_the_notebooks():
    files = [p for p in (REPO / "release").rglob("*") if p.is_file()]
    assert files and all(p.suffix == ".ipynb" for p in files), files


def release_texts():
    return {p: p.read_text() for p in (REPO / "release").rglob("*") if p.is_file()}


SOURCE_NBS = sorted((REPO / "source").glob("*/*.ipynb"))
HIDDEN_LINE = re.compile(r'^from autograder\.grader\.in_notebook import grade_step; grade_step\(globals\(\), "([^"]+)", "([^"]+)"\)$')


@pytest.mark.parametrize("source", SOURCE_NBS, ids=lambda p: p.parent.name)
def test_every_hidden_part_is_the_one_grading_line_of_its_own_cell(source):
    for cell in read(source).cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            match = HIDDEN_LINE.match(block.strip())
            assert match, f"{source.name}: hidden part must be the grade_step line, got {block!r}"
            assert match.groups() == (source.parent.name, cell.metadata["nbgrader"]["grade_id"])


@pytest.mark.parametrize("source", SOURCE_NBS, ids=lambda p: p.parent.name)
def test_no_solution_or_hidden_test_reaches_release(source):
    # a solution's signature lines are public (they stay in the release), its body lines must not be
    solution_lines = {line.strip() for cell in read(source).cells
                      for block in re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", cell.source, re.S)
                      for line in block.splitlines() if len(line.strip()) > 12 and not line.strip().startswith("def ")}
    assert len(solution_lines) >= 5
    release = REPO / "release" / source.parent.name / source.name
    text = release.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "autograder.", "import autograder", "grade_step"):
        assert marker not in text, f"{marker!r} leaked into {release}"
    code = "\n".join(cell.source for cell in nbformat.reads(text, as_version=4).cells if cell.cell_type == "code")
    for line in solution_lines:
        assert line not in code, f"{line!r} leaked into {release}"


def test_reference_code_does_not_reach_release():
    body_lines = {line.strip() for path in (REPO / "autograder").glob("reference*.py")
                  for line in path.read_text().splitlines()
                  if len(line.strip()) > 25 and not line.strip().startswith(("#", '"""', "def ", "raise ", "f\"", "\""))}
    for path, text in release_texts().items():
        nb = nbformat.reads(text, as_version=4)
        code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
        leaked = [line for line in body_lines if line in code]
        assert not leaked, f"reference lines in {path}: {leaked}"


def test_release_has_no_outputs_or_widget_state():
    for path in (REPO / "release").rglob("*.ipynb"):
        nb = read(path)
        assert "widgets" not in nb.metadata, path
        for cell in nb.cells:
            assert "widgets" not in cell.metadata
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path


def test_saved_widget_state_is_dropped_by_generate_assignment(tmp_path):
    course = course_copy(tmp_path / "course")
    source = course / "source" / ASSIGNMENT / NOTEBOOK
    nb = read(source)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"abc": {"model_name": "OutputModel", "state": {"outputs": [{"text": "SECRET-REFERENCE-0.8808"}]}}},
        "version_major": 2, "version_minor": 0}}
    nbformat.write(nb, str(source))
    out = tmp_path / "out"
    generate_release(course, [ASSIGNMENT], release_dir=out)
    text = (out / ASSIGNMENT / NOTEBOOK).read_text()
    assert "SECRET-REFERENCE" not in text and "widget-state" not in text


# "The source passes every test, the release fails every test" (nbgrader validate, and --invert) is asserted
# where each notebook is executed anyway, once per run (issue 11): tests/test_notebooks.py runs every source
# notebook (no cell may raise: every autograder cell passes); tests/test_accessibility_browser.py runs every
# untouched release (Run All in JupyterLab: every autograder cell fails). nbgrader's own `validate` is run below, on a notebook with failing self-checks.


def test_validate_reports_every_failing_self_check_with_its_plain_message_first(tmp_path):
    """Validate on the notebook Run All is tested on (tests/test_notebooks.py): the raises-exception tags change
    nothing here — every self-check that fails in the kernel is listed, each error starting with its message."""
    from autograder.assignments import get
    from self_check_harness import cells_of, first_mistake, namespace_for, our_frames, release_with, verdict

    assignment = get(ASSIGNMENT)
    cells = dict(assignment.mistakes[first_mistake(assignment)].cells)
    namespace = namespace_for(assignment, cells)
    failing = [source for source in cells_of(assignment).self_checks.values() if verdict(namespace, source)]
    assert len(failing) >= 2
    path = tmp_path / NOTEBOOK
    nbformat.write(release_with(assignment, cells), str(path))
    result = run_nbgrader(REPO, "validate", str(path), check=False)
    out = result.stdout
    assert f"VALIDATION FAILED ON {len(failing)} CELL(S)" in " ".join(out.split()), out[-3000:]
    blocks = out.split("The following cell failed:")[1:]
    assert len(blocks) == len(failing)
    for source, block in zip(failing, blocks):
        listed, error = block.split("The error was:")
        assert listed.strip() == source.strip()
        assert error.strip().startswith("✗ "), error  # the plain message first, no traceback header
    assert "Traceback" not in out and not our_frames(out.splitlines())
    assert "This looks like a known mistake: causal mask flipped" in out


def test_make_release_stops_on_a_file_that_is_not_on_the_allow_list(tmp_path, capsys):
    from autograder.nbgrader import release

    course = course_copy(tmp_path / "course")
    (course / "source" / ASSIGNMENT / "reference_solution.py").write_text("def softmax(x): ...\n")
    with pytest.raises(release.UnlistedFile) as refused:
        release.generate_release(course, [ASSIGNMENT], release_dir=tmp_path / "out")
    assert str(refused.value) == (
        f"source/{ASSIGNMENT}/reference_solution.py would be released but is not listed in "
        f"c.ReleaseFiles.allowed['{ASSIGNMENT}'] (nbgrader_config.py): list it there, or move it out of source/")
    assert not (tmp_path / "out").exists()  # nothing was written
    # listed, it is released
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.ReleaseFiles.allowed = {{{ASSIGNMENT!r}: ['reference_solution.py']}}\n")
    release.generate_release(course, [ASSIGNMENT], release_dir=tmp_path / "out")
    assert (tmp_path / "out" / ASSIGNMENT / "reference_solution.py").exists()


def test_make_release_prints_one_line_and_fails(monkeypatch, capsys):
    from autograder.nbgrader import release

    def refuse(*args, **kwargs):
        raise release.UnlistedFile("source/x/data.csv would be released but is not listed in c.ReleaseFiles.allowed")

    monkeypatch.setattr(release, "generate_release", refuse)
    assert release.main(["x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.csv" in err and "c.ReleaseFiles.allowed" in err
