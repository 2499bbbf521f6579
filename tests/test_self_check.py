"""Issue 15 §1, "Check my work": `make check` / `python -m autograder check`, the start page's button, the feedback.

In-process tests cover the report, the scratch course, the refusal of unsandboxed class grading, the MathML
feedback and its sanitising, and the button (with a stand-in check). The slow ones grade for real, once:
a sandboxed first check of assignment 1 with a known mistake, a re-check of the unchanged notebook, a
re-check after the fix with bubblewrap made unavailable (a config switch), the instructor's `grade` refusing
that machine (the first by the command line, the others by their command's ``main`` in this process), and one
Chromium test: the button on the start page in JupyterLab, its link to the feedback,
and the feedback in JupyterLab's HTML viewer (math as MathML, long lines wrapped).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import nbformat
import nbgrader
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbgrader.api import Gradebook

from autograder.examples.hostile import FULL  # assignment 1's points, its questions included
from autograder import assignments
from autograder.course import COURSE_ID
from autograder.nbgrader import check_button, feedback_html, gradebook_copy, grading, self_check
from autograder.nbgrader.fingerprints import tree_hash
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells
from autograder.nbgrader.preflight import GradingStopped
from autograder.nbgrader.sanitize import is_clean
from autograder.sandbox.unsandboxed import CONFIG_BLOCK, UnsandboxedExecute, allowed_unsandboxed
from conftest import ASSIGNMENT, NOTEBOOK, REPO

A1 = assignments.get(ASSIGNMENT)
NO_BWRAP = '\nc.SandboxedKernelManager.bwrap = "no-such-bwrap"  # the test makes bubblewrap unavailable\n'
INSTRUCTOR_STATE = ("submitted", "autograded", "feedback", "gradebook.db", "gradebook-hashes.json")


def learner_notebook(mistake: str | None) -> nbformat.NotebookNode:
    """Assignment 1 as a learner hands it in: the solution, with the bank's ``mistake`` (None: correct)."""
    release = read(REPO / "release" / ASSIGNMENT / NOTEBOOK)
    cells = solution_cells(read(REPO / "source" / ASSIGNMENT / NOTEBOOK))
    if mistake is not None:
        cells = {**cells, **A1.mistakes[mistake].cells}
    return fill_release(release, cells)


def make_course(root: Path, gradebook: bool = False) -> Path:
    """A learner's course folder: the repository's config, source/, release/, notebooks/, and an instructor's state.

    ``gradebook``: a real nbgrader gradebook (the end-to-end tests run `grade` on it), else a stand-in file.
    """
    course = grading.copy_course(REPO, root, folders=("source", "release", "notebooks"))
    (course / "submitted" / "ada" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(learner_notebook(None), str(course / "submitted" / "ada" / ASSIGNMENT / NOTEBOOK))
    for folder in ("autograded", "feedback"):
        (course / folder / "ada" / ASSIGNMENT).mkdir(parents=True)
        (course / folder / "ada" / ASSIGNMENT / "marker.txt").write_text("the instructor's")
    if gradebook:
        gradebook_copy.new_gradebook(course / "gradebook.db")  # the run's empty gradebook: no `alembic heads`
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as book:
            book.add_student("ada")  # the instructor's gradebook, with a student of their class
    else:
        (course / "gradebook.db").write_bytes(b"the instructor's gradebook")
    (course / "gradebook-hashes.json").write_text("{}")
    return course


def instructor_state(course: Path) -> dict[str, str]:
    return {name: tree_hash(course / name) for name in INSTRUCTOR_STATE}


# ---- the report ---------------------------------------------------------------------------------------------

def test_the_report_is_a_table_of_steps_with_the_mistakes_named_and_the_feedback_path(tmp_path):
    steps = [self_check.StepCheck("softmax", 2, 2), self_check.StepCheck("mask", 0, 1, ["causal mask flipped"]),
             self_check.StepCheck("entropy", 0, 1, unanswered=True)]
    checked = self_check.AssignmentCheck("01_x", tmp_path / "workspace/01_x/x.ipynb", steps,
                                         tmp_path / "workspace/feedback/01_x/x.html", regraded=False)
    missing = self_check.AssignmentCheck("02_y", tmp_path / "workspace/02_y/y.ipynb", problem="no workspace/02_y/")
    text = self_check.CheckReport(tmp_path, [checked, missing]).text()
    assert "01_x: workspace/01_x/x.ipynb (unchanged since its last check)" in text
    assert re.search(r"^  mask\s+0/1\s+causal mask flipped$", text, re.M)
    assert re.search(r"^  entropy\s+0/1\s+not answered yet$", text, re.M)
    assert re.search(r"^  softmax\s+2/2$", text, re.M) and re.search(r"^  total\s+2/4$", text, re.M)
    assert "  feedback: workspace/feedback/01_x/x.html" in text
    assert "02_y: not checked: no workspace/02_y/" in text
    assert "sandbox" not in text
    unsandboxed = self_check.CheckReport(tmp_path, [checked, checked], sandboxed=False, sandbox_problem="no bwrap")
    assert unsandboxed.text().count(self_check.UNSANDBOXED) == 1 and "(no bwrap)" in unsandboxed.text()


@pytest.mark.parametrize("name, expected", [("01", ASSIGNMENT), ("1", ASSIGNMENT), (ASSIGNMENT, ASSIGNMENT)])
def test_an_assignment_is_named_by_its_id_or_number(name, expected):
    known = sorted(p.name for p in (REPO / "source").iterdir() if p.is_dir())
    assert self_check.resolve_assignment(name, known) == expected


def test_without_a_choice_an_untouched_release_copy_is_reported_not_started_without_grading(tmp_path, monkeypatch):
    course = make_course(tmp_path / "course")
    shutil.copytree(course / "release" / ASSIGNMENT, course / "workspace" / ASSIGNMENT)
    monkeypatch.setattr(self_check, "check_assignment", lambda *args: pytest.fail("an untouched notebook was graded"))
    (checked,) = self_check.check(course).checks
    assert checked.problem == self_check.NOT_STARTED and not checked.steps
    assert self_check.untouched(course, ASSIGNMENT)
    with open(course / "workspace" / ASSIGNMENT / NOTEBOOK, "a") as notebook:
        notebook.write(" ")
    assert not self_check.untouched(course, ASSIGNMENT)


def test_an_unknown_assignment_is_refused_with_the_known_ones_listed():
    with pytest.raises(ValueError, match=r"A='99' names no assignment; give one of 01_a, 02_b"):
        self_check.resolve_assignment("99", ["01_a", "02_b"])


# ---- the scratch course --------------------------------------------------------------------------------------

def test_the_scratch_course_holds_copies_and_leaves_the_instructors_state_alone(tmp_path):
    course = make_course(tmp_path / "course")
    before = instructor_state(course)
    assert "no workspace/" in self_check.hand_in(course, self_check.prepare_scratch(course, ASSIGNMENT, True), ASSIGNMENT)
    mine = course / "workspace" / ASSIGNMENT
    mine.mkdir(parents=True)
    assert f"has no {NOTEBOOK}" in self_check.hand_in(course, course / self_check.SCRATCH, ASSIGNMENT)
    nbformat.write(learner_notebook("mask_flipped"), str(mine / NOTEBOOK))
    (mine / "my notes.txt").write_text("mine")
    scratch = self_check.prepare_scratch(course, ASSIGNMENT, sandboxed=True)
    assert scratch == course / "workspace" / ".check"
    assert self_check.hand_in(course, scratch, ASSIGNMENT) == ""
    handed = scratch / "submitted" / self_check.LEARNER / ASSIGNMENT
    assert sorted(p.name for p in handed.iterdir()) == [NOTEBOOK]  # the notebook only, not the learner's other files
    assert (handed / NOTEBOOK).read_bytes() == (mine / NOTEBOOK).read_bytes()
    assert (scratch / "nbgrader_config.py").read_text() == (course / "nbgrader_config.py").read_text()
    assert tree_hash(scratch / "source" / ASSIGNMENT) == tree_hash(course / "source" / ASSIGNMENT)
    stamps = {p: p.stat().st_mtime_ns for p in (handed / NOTEBOOK, scratch / "nbgrader_config.py")}
    self_check.prepare_scratch(course, ASSIGNMENT, sandboxed=True)
    self_check.hand_in(course, scratch, ASSIGNMENT)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # unchanged files are not rewritten
    self_check.prepare_scratch(course, ASSIGNMENT, sandboxed=False)
    config = grading.course_config(scratch)
    assert allowed_unsandboxed(config.Autograde.autograde_preprocessors)
    assert (scratch / "nbgrader_config.py").read_text().endswith(CONFIG_BLOCK)
    assert instructor_state(course) == before


def test_the_class_grader_refuses_a_course_that_runs_learners_code_outside_the_sandbox(tmp_path):
    course = grading.copy_course(REPO, tmp_path / "course")
    assert not allowed_unsandboxed(grading.course_config(course).Autograde.autograde_preprocessors)
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(CONFIG_BLOCK)
    assert UnsandboxedExecute in grading.course_config(course).Autograde.autograde_preprocessors
    with pytest.raises(GradingStopped, match="outside the grading sandbox .* only `python -m autograder check`"):
        grading.grade_class(course, ASSIGNMENT, ["ada"])
    assert not (course / "gradebook.db").exists()


def test_the_sandbox_problem_names_the_missing_bubblewrap(tmp_path):
    course = grading.copy_course(REPO, tmp_path / "course", folders=())
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(NO_BWRAP)
    assert "'no-such-bwrap' was not found on PATH" in self_check.sandbox_problem(course)


# ---- the feedback: MathML, sanitised, and wrapped ----------------------------------------------------------------

@pytest.mark.parametrize("latex, element", [(r"QK^\top", "msup"), (r"\sqrt{d_k}", "msqrt"),
                                            (r"-\sum_j p_j \ln p_j", "msub"), (r"\frac{QK^\top}{\sqrt{d_k}}", "mfrac"),
                                            (r"T_q \ne T_k", "mo")])
def test_the_course_formulas_become_mathml_that_the_sanitiser_keeps_as_it_is(latex, element):
    mathml = feedback_html.latex_to_mathml(latex)
    assert mathml.startswith("<math") and f"<{element}>" in mathml
    assert is_clean(mathml)  # every element and attribute the converter writes is on the allow-list


HOSTILE_LATEX = [r"\text{<img/src=x/onerror=alert(1)>}", r"\href{javascript:alert(1)}{x}",
                 r"\text{</math><script>alert(1)</script>}", r"\style{background:url(javascript:alert(1))}{x}",
                 r"\text{<a href=javascript:alert(1)>x</a>}", r"\text{<iframe srcdoc='<script>alert(1)</script>'>}",
                 r"\text{<svg><animate onbegin=alert(1)>}", r"\text{<math><maction actiontype=statusline>x</maction>}"]


@pytest.mark.parametrize("latex", HOSTILE_LATEX)
def test_hostile_latex_gives_mathml_without_anything_that_runs(latex):
    """latex2mathml copies \\text{…} and \\href through as they are: the sanitiser must take out what runs."""
    for display in ("inline", "block"):
        mathml = feedback_html.latex_to_mathml(latex, display) or ""
        lowered = mathml.lower()
        for active in ("<script", "onerror", "onbegin", "javascript:", "<iframe", "srcdoc", "<a ", "href", "<svg",
                       "maction", "url("):
            assert active not in lowered, (latex, mathml)


def feedback_page(markdown: str, outputs=(), exporter_class=feedback_html.FeedbackExporter, metadata=None,
                  left_out=("GetGrades",)) -> str:
    """Feedback HTML of a one-cell notebook, rendered as ``generate_feedback`` renders it (the course's exporter),
    its code cell giving ``outputs``; the preprocessors named in ``left_out`` are not run (GetGrades needs a
    gradebook; the page's header reads its numbers from ``resources``)."""
    code = nbformat.v4.new_code_cell("x = 1  # " + "a long line " * 60, outputs=list(outputs), id="code")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown, id="prose"), code],
                                  metadata=metadata or {})  # fixed cell ids: pages of one notebook are equal
    config = grading.course_config(REPO)
    config.HTMLExporter.template_name = "feedback"  # nbgrader's template, as generate_feedback sets it
    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    config.HTMLExporter.extra_template_paths = [str(formgrader / "static/node_modules/bootstrap/dist/css")]
    exporter = exporter_class(config=config)
    for preprocessor in config.GenerateFeedback.preprocessors:
        if preprocessor.__name__ not in left_out:
            exporter.register_preprocessor(preprocessor, enabled=True)
    resources = {"nbgrader": {"notebook": "x", "score": 1, "max_score": 2, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources=resources)[0]


def test_the_course_renders_feedback_with_the_mathml_exporter_and_the_wrapping_style():
    config = grading.course_config(REPO)
    assert config.GenerateFeedback.exporter_class is feedback_html.FeedbackExporter
    assert feedback_html.ReadableFeedback in config.GenerateFeedback.preprocessors
    page = feedback_page(r"Scores $QK^\top$ scaled by $\sqrt{d_k}$: $$\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$")
    maths = re.findall(r"<math [^>]*>", page)
    assert len(maths) == 3 and all('xmlns="http://www.w3.org/1998/Math/MathML"' in m for m in maths)
    assert ['display="block"' in m for m in maths] == [False, False, True]
    assert r"$QK^\top$" not in page and "<msqrt>" in page
    assert "white-space: pre-wrap" in page and feedback_html.READABLE_CSS.strip() in page


def test_hostile_markdown_math_in_feedback_runs_nothing():
    page = feedback_page(" ".join(f"${latex}$" for latex in HOSTILE_LATEX))
    body = page.split("<body", 1)[1].lower()  # the head holds bootstrap's CSS, which names javascript: links
    assert body.count("<math") >= len(HOSTILE_LATEX)  # each became MathML, after the notebook was sanitised
    for active in ("onerror", "onbegin", "javascript:", "<iframe", "srcdoc", "<script>alert", "maction"):
        assert active not in body


class NbconvertsExporter(feedback_html.FeedbackExporter):
    """The course's exporter rendering as nbconvert's HTMLExporter does: every page parsed again after rendering."""

    def from_notebook_node(self, nb, resources=None, **kw):
        return HTMLExporter.from_notebook_node(self, nb, resources, **kw)


PNG_OUTPUT = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89"
    b"\0\0\0\rIDATx\x9cc\xf8\xff\xff?\0\x05\xfe\x02\xfe\xa7\x35\x81\x84\0\0\0\0IEND\xaeB`\x82").decode(),
                                                                       "text/plain": "<Figure>"})


@pytest.mark.parametrize("outputs", [(), (PNG_OUTPUT,)], ids=["no image", "an image without alt"])
def test_feedback_is_the_page_nbconverts_exporter_writes(outputs):
    """The same page as nbconvert's HTMLExporter (up to how BeautifulSoup re-serialises it), its image given the
    same text alternative."""
    markdown = r"Scores $QK^\top$ <img src='https://example.org/a.png'> and ![a plot](p.png) with <b>bold</b>"
    ours, theirs = (feedback_page(markdown, outputs, exporter) for exporter in
                    (feedback_html.FeedbackExporter, NbconvertsExporter))
    assert str(BeautifulSoup(ours, "html.parser")) == theirs
    images = BeautifulSoup(ours, "html.parser").select("img")
    assert [image.get("alt") for image in images] == [feedback_html.MISSING_ALT] * len(outputs)


def test_a_feedback_page_is_parsed_again_only_when_it_has_an_image(monkeypatch):
    import nbconvert.exporters.html

    parsed = []

    def counted(*args, **kwargs):
        parsed.append(args[0][:30])
        return BeautifulSoup(*args, **kwargs)

    for module in (feedback_html, nbconvert.exporters.html):  # ours, and the one HTMLExporter's own pass uses
        monkeypatch.setattr(module, "BeautifulSoup", counted)
    feedback_page(r"Scores $QK^\top$, `code`, **bold** and a table: | a | b |")
    assert parsed == []
    feedback_page("a plot", [PNG_OUTPUT])
    assert len(parsed) == 1


@pytest.mark.parametrize("left_out", [("GetGrades",), ("GetGrades", "SanitizeNotebook")],
                         ids=["as graded", "without the sanitiser"])
def test_feedback_shows_a_widget_view_as_its_text_even_with_the_widget_state(left_out):
    """No widget manager script: the view's text/plain is shown. The sanitiser drops views and widget state; the
    exporter shows none either, in a pipeline without it."""
    view = nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2, "version_minor": 0},
        "text/plain": "VBox(children=(IntSlider(value=8),))"})
    state = {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {"m1": {}}, "version_major": 2,
                                                                            "version_minor": 0}}}
    page = feedback_page("widgets", [view], metadata=state, left_out=left_out)
    assert "VBox(children=(IntSlider(value=8),))" in page
    assert "widget-view+json" not in page and "widget-state+json" not in page


def test_math_the_converter_cannot_read_stays_latex_text():
    assert feedback_html.latex_to_mathml(r"\begin{notanenvironment}") is None
    page = feedback_page(r"broken $\begin{notanenvironment}$ math")
    assert r"\begin{notanenvironment}" in page


# ---- the button -------------------------------------------------------------------------------------------------

def test_the_button_runs_the_check_and_shows_the_table_and_links_to_the_feedback(tmp_path, monkeypatch):
    course = make_course(tmp_path / "course")
    monkeypatch.chdir(course / "notebooks")
    feedback = course / "workspace" / "feedback" / ASSIGNMENT / "scaled_dot_product_attention.html"
    report = self_check.CheckReport(course, [self_check.AssignmentCheck(
        ASSIGNMENT, course / "workspace" / ASSIGNMENT / NOTEBOOK,
        [self_check.StepCheck("mask", 0, 1, ["causal mask flipped: upper triangle"])], feedback)],
        sandboxed=False, sandbox_problem="no bwrap")
    calls = []
    widget = check_button.check_button(run=lambda where, chosen: calls.append((where, chosen)) or report)
    assert check_button.course_folder() == course.resolve()
    choice, button = widget.children[0].children
    output = widget.children[1]
    assert button.description == "Check my work" and ASSIGNMENT in [value for _, value in choice.options]
    choice.value = ASSIGNMENT
    button.click()
    assert calls == [(course.resolve(), [ASSIGNMENT])]
    (shown,) = output.outputs
    page = shown["data"]["text/html"]
    assert re.search(r"mask\s+0/1\s+causal mask flipped: upper triangle", page)
    assert page.count("outside the grading sandbox") == 1
    assert f'<a href="../workspace/feedback/{ASSIGNMENT}/scaled_dot_product_attention.html">' in page
    assert not button.disabled


def test_the_button_says_why_a_check_could_not_start(tmp_path, monkeypatch):
    course = make_course(tmp_path / "course")
    monkeypatch.chdir(course / "notebooks")

    def stopped(where, chosen):
        raise GradingStopped("grading stopped before the first student: the grading kernel cannot import numpy")

    widget = check_button.check_button(run=stopped)
    widget.children[0].children[1].click()
    assert "check stopped: grading stopped before the first student: the grading kernel cannot import numpy" in \
        widget.children[1].outputs[0]["data"]["text/html"]


def start_page_cell() -> str:
    (cell,) = [c for c in read(REPO / "notebooks" / "00_start_here.ipynb").cells if c.cell_type == "code"]
    return cell.source


def test_the_start_page_shows_the_button_and_says_what_to_do_where_there_is_no_grader(monkeypatch):
    source = start_page_cell()
    assert "check_button()" in source
    shown = []
    exec(compile(source, "start page", "exec"), {"display": shown.append})
    assert shown and shown[0].children[0].children[1].description == "Check my work"
    real_import = builtins.__import__

    def no_grader(name, *args, **kwargs):  # the in-browser edition: no autograder package
        if name.startswith("autograder"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_grader)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "start page", "exec"), {"display": shown.append})
    assert "needs the grader: clone the repository and run `make lab`" in printed.getvalue()


def test_nothing_of_the_check_ships_into_the_release():
    for path in (REPO / "release").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "check_button" not in text and "Check my work" not in text and "self_check" not in text, path


# ---- end to end: sandboxed check, re-checks, bubblewrap unavailable, and the browser ----------------------------------

def run_cli(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "autograder", *args, "--course-dir", str(course)], env=env,
                          capture_output=True, text=True, timeout=900)


def run_in_process(course: Path, *args: str) -> subprocess.CompletedProcess:
    """:func:`run_cli`'s command run by its module's ``main`` in this process; its stdout and stderr as a finished
    process's, its exit status as the return code.

    For the runs after the first, which checks the command line itself from a fresh interpreter: a fresh
    interpreter's start and imports (about 1.8 CPU-s a run) were most of the cost of the two that grade nothing (a
    re-check of an unchanged notebook, `grade` refused before the first student), and the re-check after the fix
    also skips the feedback templates' warm-up done here before. The environment is run_cli's, for the call only
    (``check`` puts this interpreter's bin/ on PATH); the grading jobs are forked from this process.
    """
    command, rest = args[0], [*args[1:], "--course-dir", str(course)]
    main = {"check": self_check.main, "grade": grading.main}[command]
    out, err = io.StringIO(), io.StringIO()
    environment = {"OPENBLAS_NUM_THREADS": "1",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with mock.patch.dict(os.environ, environment), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(rest)
    return subprocess.CompletedProcess(["python", "-m", "autograder", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One course folder checked three times, and the instructor's `grade` tried on it; the outputs of each."""
    course = make_course(tmp_path_factory.mktemp("self-check") / "course", gradebook=True)
    before = instructor_state(course)
    (course / "workspace" / ASSIGNMENT).mkdir(parents=True)
    mine = course / "workspace" / ASSIGNMENT / NOTEBOOK
    nbformat.write(learner_notebook("mask_flipped"), str(mine))
    runs = {"first": run_cli(course, "check", "01")}
    log = course / self_check.SCRATCH / "grading.log"
    runs["log after first"] = log.read_text() if log.exists() else ""
    runs["again"] = run_in_process(course, "check", "01")
    runs["log after again"] = log.read_text() if log.exists() else ""
    fixed = learner_notebook(None)
    fixed.cells.append(nbformat.v4.new_code_cell("# " + "a very long comment line without a break " * 12 + "x" * 300))
    nbformat.write(fixed, str(mine))
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(NO_BWRAP)
    runs["fixed, no bubblewrap"] = run_in_process(course, "check")
    runs["grade, no bubblewrap"] = run_in_process(course, "grade", ASSIGNMENT)
    runs["instructor state"] = (before, instructor_state(course))
    return course, runs


@pytest.mark.slow
def test_a_sandboxed_check_prints_the_table_with_the_mistake_and_the_feedback(checked):
    course, runs = checked
    first = runs["first"]
    assert first.returncode == 0, first.stderr[-3000:]
    out = first.stdout
    assert f"{ASSIGNMENT}: workspace/{ASSIGNMENT}/{NOTEBOOK} (checked now)" in out
    assert re.search(r"^  mask\s+0/1\s+causal mask flipped: upper triangle \(queries see the future\)$", out, re.M)
    for step in ("softmax", "scores", "scaling", "attention", "self_attn", "entropy"):
        assert re.search(rf"^  {step}\s+(\d+)/\1$", out, re.M), step  # full points, nothing named
    assert re.search(rf"^  total\s+{FULL - 1:g}/{FULL:g}$", out, re.M)
    feedback = f"workspace/feedback/{ASSIGNMENT}/scaled_dot_product_attention.html"
    assert f"  feedback: {feedback}" in out and (course / feedback).is_file()
    assert "outside the grading sandbox" not in out + first.stderr
    assert "<math" in (course / feedback).read_text()
    before, after = runs["instructor state"]
    assert after == before  # never the instructor's submitted/, autograded/, feedback/ or gradebook


@pytest.mark.slow
def test_a_re_check_of_an_unchanged_notebook_grades_nothing_again(checked):
    _, runs = checked
    again = runs["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{ASSIGNMENT}: workspace/{ASSIGNMENT}/{NOTEBOOK} (unchanged since its last check)" in again.stdout
    assert re.search(r"^  mask\s+0/1\s+causal mask flipped", again.stdout, re.M)
    assert runs["log after again"] == runs["log after first"]  # no nbgrader run, no generate_assignment


@pytest.mark.slow
def test_without_bubblewrap_the_check_says_so_once_and_grades_the_fix(checked):
    course, runs = checked
    fixed = runs["fixed, no bubblewrap"]
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert fixed.stdout.count("outside the grading sandbox") == 1
    assert "'no-such-bwrap' was not found on PATH" in fixed.stdout
    assert re.search(r"^  mask\s+1/1$", fixed.stdout, re.M) and re.search(rf"^  total\s+{FULL:g}/{FULL:g}$", fixed.stdout, re.M)
    assert "(checked now)" in fixed.stdout
    assert "mistake" not in fixed.stdout.split("mistake found", 1)[1]


@pytest.mark.slow
def test_without_bubblewrap_the_instructors_grade_still_refuses(checked):
    _, runs = checked
    grade = runs["grade, no bubblewrap"]
    assert grade.returncode == 1
    assert "grading stopped before the first student: the grading sandbox cannot start a kernel" in grade.stderr
    assert "'no-such-bwrap' was not found on PATH" in grade.stderr
    before, after = runs["instructor state"]
    assert after == before


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium") and not os.environ.get("CI"),
                    reason="/usr/bin/chromium is not installed")
def test_the_button_in_jupyterlab_links_to_feedback_with_mathml_that_wraps(checked):
    """The start page's button in Chromium: a re-check, its table, and its link opening the feedback in the HTML viewer."""
    from playwright.sync_api import expect, sync_playwright

    from browser_support import lab_server, launch, wait_idle

    course, _ = checked
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    with lab_server(course, artifacts / "self_check_jupyterlab.log") as base, sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{base}/lab/tree/notebooks/00_start_here.ipynb?reset")
        wait_idle(page)
        cell = page.locator(".jp-CodeCell").first
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        button = page.locator("button.jupyter-button", has_text="Check my work")
        button.click(timeout=90_000)
        link = page.locator(".jp-OutputArea-output a", has_text=f"feedback on {ASSIGNMENT}")
        expect(link).to_be_visible(timeout=300_000)
        table = page.locator("pre.attention-lab-check").inner_text()
        assert "(unchanged since its last check)" in table and re.search(rf"total\s+{FULL:g}/{FULL:g}", table)
        assert table.count("outside the grading sandbox") == 1
        link.click()
        viewer = page.locator(".jp-HTMLViewer iframe")
        expect(viewer).to_be_visible(timeout=60_000)
        frame = page.frame_locator(".jp-HTMLViewer iframe")
        expect(frame.locator("math").first).to_be_attached(timeout=60_000)
        rendered = frame.locator("body").evaluate("""body => {
            const maths = [...body.querySelectorAll('math')];
            const long = [...body.querySelectorAll('pre')].find(p => p.textContent.includes('xxxxxxxxxx'));
            const r = long.getBoundingClientRect();
            return {count: maths.length, mathml: maths.every(m => m.namespaceURI === 'http://www.w3.org/1998/Math/MathML'),
                    display: getComputedStyle(maths[0]).display, fraction: body.querySelectorAll('mfrac, msqrt').length,
                    height: maths.map(m => m.getBoundingClientRect().height).reduce((a, b) => Math.max(a, b), 0),
                    viewport: window.innerWidth, longRight: r.right, longWidth: r.width, lines: r.height,
                    pageWidth: document.documentElement.scrollWidth}; }""")
        page.screenshot(path=str(artifacts / "self_check_feedback.png"))
        browser.close()
    assert rendered["count"] >= 10 and rendered["mathml"] and rendered["fraction"] >= 1
    assert "math" in rendered["display"]  # Chromium lays <math> out as MathML, not as an unknown inline element
    assert rendered["height"] > 0
    assert rendered["longRight"] <= rendered["viewport"] and rendered["pageWidth"] <= rendered["viewport"], rendered
    assert rendered["lines"] > 40, rendered  # the 800-character line wrapped onto several lines


def test_the_grading_record_knows_which_source_the_gradebook_was_loaded_from(tmp_path):
    """What lets a re-check skip generate_assignment: the fingerprint follows the source and the grader, and is kept."""
    from autograder.nbgrader.fingerprints import GradingRecord, loaded_source_fingerprint

    course = grading.copy_course(REPO, tmp_path / "course")
    key = loaded_source_fingerprint(course, ASSIGNMENT)
    assert key == loaded_source_fingerprint(course, ASSIGNMENT, grader=None)
    assert GradingRecord(course).loaded_source(ASSIGNMENT) != key
    GradingRecord(course).loaded(ASSIGNMENT, key)
    assert GradingRecord(course).loaded_source(ASSIGNMENT) == key  # read back from gradebook-hashes.json
    assert loaded_source_fingerprint(course, ASSIGNMENT, grader="another grader") != key
    with open(course / "source" / ASSIGNMENT / NOTEBOOK, "a") as notebook:
        notebook.write(" ")
    assert GradingRecord(course).loaded_source(ASSIGNMENT) != loaded_source_fingerprint(course, ASSIGNMENT)
