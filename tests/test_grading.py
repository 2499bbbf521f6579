"""End to end with nbgrader: the example class of every assignment, hostile submissions, `make grade`'s table and
CSVs, and the grader report (`make report`). (`make grade` on a course of its own, its re-runs and a re-submission
that ends its kernel: tests/test_parallel_grading.py, the copied course.)

The class is graded once per session (``graded_class`` in conftest.py), through the configured
pipeline: sandboxed kernel, probes, comparison outside the kernel. Every test that reads it is in this
module, so that under pytest-xdist (``--dist loadfile``) one worker grades it once.
"""

import csv
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import assignments
from autograder.examples import example_class, hostile, report
from autograder.nbgrader import grading
from autograder.grader.in_process import grade_variant
from autograder.nbgrader.notebook_cells import read
from a07_memory_stand_in import memory_stand_in
from conftest import ASSIGNMENT, NOTEBOOK, REPO

NAMES = list(assignments.all_assignments())


def test_the_sample_of_example_students_of_every_assignment_is_graded_as_the_model_says(graded_class):
    """End to end on the fixed sample; tests/test_example_class.py checks the model on every example student."""
    _, results, _ = graded_class
    assert list(results) == NAMES
    for name, (steps, rows) in results.items():
        assignment = assignments.get(name)
        by_student = {r.student: r for r in rows}
        sample = example_class.end_to_end_sample(assignment)
        assert [r.student for r in rows if not r.student.startswith("hostile-")] == sample, name
        for student in sample:
            variant = example_class.students_of(assignment)[student]
            result = by_student[student]
            assert result.steps is not None, (name, student, result.note)
            losses = example_class.expected_losses(assignment, student)
            for step, (score, maximum) in result.steps.items():
                assert (score < maximum) == (step in losses), (name, student, step, score)
            if variant is not None:
                model = {g: v.score for g, v in grade_variant(assignment, variant).items()}
                assert {g: s for g, (s, _) in result.steps.items()} == model, (name, student)


def test_the_untouched_release_earns_zero_and_the_solution_full_marks_everywhere(graded_class):
    _, results, _ = graded_class
    for name, (_, rows) in results.items():
        by_student = {r.student: r for r in rows}
        assert by_student[example_class.UNTOUCHED].total == 0, name
        maximum = sum(m for _, m in by_student[example_class.CORRECT_STUDENT].steps.values())
        assert by_student[example_class.CORRECT_STUDENT].total == maximum > 0, name


@pytest.mark.parametrize("key", list(hostile.CASES))
def test_hostile_submission_is_handled(graded_class, key):
    _, _, outcomes = graded_class
    problem = hostile.CASES[key].check(outcomes[key])
    assert problem is None, f"{key}: {problem}"


def test_each_browser_payload_is_checked_on_its_own_in_the_one_submission_that_carries_them_all(tmp_path):
    """The xss-<kind> cases share one graded submission: each kind's check fails when its own payload survives
    (left active in its cells, or not listed as sanitised), and a kind whose cells it does not share still passes."""
    import copy

    from autograder.examples import hostile_payloads as payloads
    from autograder.nbgrader.notebook_cells import solution_cells
    from autograder.nbgrader.sanitize import sanitize_notebook
    from conftest import RELEASE_NB, SOURCE_NB

    context = hostile.Context(tmp_path, read(RELEASE_NB), solution_cells(read(SOURCE_NB)))
    folder = tmp_path / "submitted" / hostile.XSS_STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    hostile.CASES["xss-link"].build(folder, context)  # every xss case builds the same submission
    submitted = read(tmp_path / "submitted" / hostile.XSS_STUDENT / ASSIGNMENT / NOTEBOOK)
    kinds = list(payloads.payloads())
    shared = {key for key in hostile.CASES if hostile.student_of(key) == hostile.XSS_STUDENT}
    assert shared == {f"xss-{k}" for k in kinds}

    def outcome(autograded, feedback="<p>inert</p>"):
        cells = ", ".join(autograded.metadata.attention_lab.sanitized)
        note = f"content that could run in a browser removed (cells {cells})"
        return hostile.Outcome(hostile.FULL, note, [], autograded, feedback, tmp_path)

    graded = copy.deepcopy(submitted)
    graded.metadata["attention_lab"] = {"sanitized": {str(k): v for k, v in sanitize_notebook(graded).items()}}
    last_code = next(c for c in reversed(graded.cells) if c.cell_type == "code")
    last_code.outputs = [nbformat.v4.new_output("display_data", data={"image/png": payloads.PNG})]  # the honest figure
    assert {k: hostile.CASES[f"xss-{k}"].check(outcome(graded)) for k in kinds} == dict.fromkeys(kinds)
    for kind in kinds:
        cells = payloads.cells_carrying(submitted, kind)
        assert cells, kind
        sharing = {k for k in kinds if set(payloads.cells_carrying(submitted, k)) & set(cells)}
        # the code payloads share the answer cell (and its forged output) with forged-output; the others have their own
        in_answer = {"display-html", "javascript", "svg", "image-size", "forged-output"}
        assert sharing == (in_answer if kind in in_answer else {kind}), kind
        apart = [k for k in kinds if k not in sharing]
        survived = copy.deepcopy(graded)  # listed as sanitised, but its cells left as handed in (active)
        for number in cells:
            survived.cells[number - 1] = copy.deepcopy(submitted.cells[number - 1])
        assert "active content survived" in hostile.CASES[f"xss-{kind}"].check(outcome(survived)), kind
        assert all(hostile.CASES[f"xss-{k}"].check(outcome(survived)) is None for k in apart), kind
        unlisted = copy.deepcopy(graded)  # made inert but not listed: the payload was not seen as one
        for number in cells:
            unlisted.metadata.attention_lab.sanitized.pop(str(number))
        assert "were not sanitised" in hostile.CASES[f"xss-{kind}"].check(outcome(unlisted)), kind
        assert all(hostile.CASES[f"xss-{k}"].check(outcome(unlisted)) is None for k in apart), kind
    leaked = payloads.payloads()["markdown-html"]["markdown"]  # left active in the feedback
    problem = hostile.CASES["xss-markdown-html"].check(outcome(graded, f"<div>{leaked}</div>"))
    assert "active content survived" in problem
    # what names no payload cannot be told apart: it fails every kind
    assert "active content survived" in hostile.CASES["xss-link"].check(outcome(graded, "<iframe></iframe>"))


def test_the_cases_that_must_keep_full_marks_share_one_submission_that_carries_each_of_their_attacks(tmp_path):
    """The tolerated cases are graded in one submission (``hostile.TOLERATED_STUDENT``), each checked on its own:
    it is the correct solution and carries every one's attack, so each check reads a grading of its own attack."""
    from autograder.nbgrader.notebook_cells import nbgrader_meta, solution_cells
    from conftest import RELEASE_NB, SOURCE_NB

    context = hostile.Context(tmp_path, read(RELEASE_NB), solution_cells(read(SOURCE_NB)))
    shared = {key for key in hostile.CASES if hostile.student_of(key) == hostile.TOLERATED_STUDENT}
    assert shared == set(hostile.TOLERATED_PARTS) == {
        "reseeds-global-rng", "deleted-test-cells", "changed-kernelspec", "huge-output", "saved-widget-state",
        "copied-solution-cell", "extra-files"}
    folder = tmp_path / "submitted" / hostile.TOLERATED_STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    hostile.CASES["extra-files"].build(folder, context)  # every tolerated case builds the same submission
    nb = read(folder / NOTEBOOK)
    metas = [nbgrader_meta(cell) for cell in nb.cells]
    sources = {meta["grade_id"]: cell.source.rstrip() for cell, meta in zip(nb.cells, metas) if meta.get("solution")}
    assert sources["softmax"] == "np.random.seed(0)\nnp.random.default_rng = lambda *a, **k: None\n" + (
        context.solutions["softmax"].rstrip())  # reseeds-global-rng
    assert not any(meta.get("grade") and not meta.get("solution") for meta in metas)  # deleted-test-cells
    assert nb.metadata.kernelspec.name == "bash"  # changed-kernelspec
    assert sources["attention_entropy"] == "print('x' * 50_000_000)\n" + context.solutions["attention_entropy"].rstrip()
    assert "widgets" in nb.metadata  # saved-widget-state
    assert [meta.get("grade_id") for meta in metas].count("causal_mask") == 2  # copied-solution-cell
    assert sorted(p.name for p in folder.iterdir()) == sorted([NOTEBOOK, "figure.svg", "helper.py", "notes.html"])
    rest = [g for g in context.solutions if g not in ("softmax", "attention_entropy")]
    assert rest and {g: sources[g] for g in rest} == {g: context.solutions[g].rstrip() for g in rest}  # else correct


def _sampled_bank_mistake(name: str = ASSIGNMENT) -> tuple[str, str]:
    """(student, mistake key) of the sample's student who hands in a known mistake of the bank."""
    assignment = assignments.get(name)
    keys = {id(variant): key for key, variant in assignment.mistakes.items()}
    return next((student, keys[id(variant)]) for student in example_class.end_to_end_sample(assignment)
                if id(variant := example_class.students_of(assignment)[student]) in keys)


def test_named_mistakes_reach_the_table_and_the_feedback(graded_class):
    course, results, _ = graded_class
    steps, rows = results[ASSIGNMENT]
    student, key = _sampled_bank_mistake()
    mistake = assignments.get(ASSIGNMENT).mistakes[key]
    result = next(r for r in rows if r.student == student)
    assert result.named == [key]
    total = sum(v.score for v in grade_variant(assignments.get(ASSIGNMENT), mistake).values())
    assert 0 < total < hostile.FULL
    table = grading.format_table(steps, rows, ASSIGNMENT)
    assert table.splitlines()[0].split()[:4] == ["student", *(step.title for step in hostile.SPEC.steps[:3])]
    assert re.search(rf"{student} .* {total:g}/{hostile.FULL:g}\s+{key}$", table, re.M), table
    page = html.unescape((course / "feedback" / student / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text())
    page = " ".join(page.split())  # the feedback wraps long lines
    assert f"This looks like a known mistake: {' '.join(mistake.description.split())}" in page
    assert f"Hint: {' '.join(mistake.hint.split())}"[:60] in page


def test_questions_are_graded_end_to_end_and_the_written_answer_is_a_0_point_manual_cell(graded_class):
    """nbgrader in the sandbox reads the answers through the probe: an answer written differently ([2, 0], 2.08)
    earns the points, a known wrong answer loses them with its misconception in the feedback; the written answer is
    a manually graded cell worth 0 points (nbgrader scores an unanswered one 0 itself)."""
    from nbgrader.api import Gradebook

    course, results, _ = graded_class
    spec = assignments.get(ASSIGNMENT)
    questions = [q.grade_id for q in spec.questions]
    _, rows = results[ASSIGNMENT]
    by_student = {r.student: r for r in rows}
    assert {q: by_student["cai-einsum-and-1e9"].steps[q] for q in questions} == dict.fromkeys(questions, (1.0, 1.0))
    lea = by_student["lea-softmax-unfinished"]
    assert lea.steps["question_entropy_ceiling"] == (0.0, 1.0) and lea.steps["question_nan_rows"] == (1.0, 1.0)
    assert "question_entropy_ceiling_3p0" in lea.named
    page = html.unescape((course / "feedback" / "lea-softmax-unfinished" / ASSIGNMENT /
                          NOTEBOOK.replace(".ipynb", ".html")).read_text())
    hint = spec.mistakes["question_entropy_ceiling_3p0"].hint
    assert "your answer 3 is not right" in " ".join(page.split()) and hint[:50] in " ".join(page.split())
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=grading.COURSE_ID) as gradebook:
        written = [g for nb in gradebook.find_submission(ASSIGNMENT, "lea-softmax-unfinished").notebooks
                   for g in nb.grades if g.name.startswith("written_")]
        # a manually graded markdown cell worth 0 points; left as the release's "YOUR ANSWER HERE", nbgrader scores it 0
        # itself and asks no manual grade (an answered one waits for the instructor in Formgrader)
        assert [(g.cell.cell_type, g.max_score, g.score) for g in written] == [("markdown", 0.0, 0.0)]


def test_feedback_holds_no_hidden_tests_reference_or_hidden_values(graded_class):
    course, results, _ = graded_class
    from autograder.grader.comparison import Grader
    forbidden = ["BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "grade_step", "_attention_lab_probe", "from autograder",
                 *_reference_only_lines()]
    for name in NAMES:
        assignment = assignments.get(name)
        grader = Grader(assignment)
        hidden_numbers = set()
        for step in assignment.steps:
            for case in grader.cases[step.grade_id]:
                for value in [*case.args, *case.kwargs.values()]:
                    if hasattr(value, "dtype") and value.dtype.kind == "f":
                        hidden_numbers.update(f"{v:.6f}" for v in value.ravel()[:8] if abs(v) > 0.01)
        for html in (course / "feedback").glob(f"*/{name}/*.html"):
            text = html.read_text()
            for marker in forbidden:
                assert marker not in text, (html, marker)
            leaked = [n for n in hidden_numbers if n in text]
            assert not leaked, (html, leaked[:3])


def _reference_only_lines():
    """Code lines of the references that no source notebook shows (a learner's own solution may match the rest)."""
    notebooks = "\n".join(p.read_text() for p in (REPO / "source").glob("*/*.ipynb"))
    lines = {line.strip() for path in (REPO / "autograder").glob("reference*.py") for line in path.read_text().splitlines()
             if len(line.strip()) > 30 and not line.strip().startswith(("#", '"', "'", "def ", "raise ", "f\"", "return "))}
    return sorted(line for line in lines if line not in notebooks and html.escape(line) not in notebooks)


def test_explorer_is_skipped_under_autograde_without_widget_output(graded_class):
    course, _, _ = graded_class
    nb = read(course / "autograded" / example_class.CORRECT_STUDENT / ASSIGNMENT / NOTEBOOK)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("not shown while grading" in o.get("text", "") for o in outputs)
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)


def test_figures_are_not_drawn_under_autograde_and_say_so(graded_class):
    """Rendering a figure is most of its cell's CPU and no grade reads it (attention_lab.core.plots.show_figure)."""
    course, _, _ = graded_class
    nb = read(course / "autograded" / example_class.CORRECT_STUDENT / ASSIGNMENT / NOTEBOOK)
    figure_cells = [c for c in nb.cells if c.cell_type == "code" and "show_figure(" in c.source]
    assert figure_cells
    for cell in figure_cells:
        assert "(the figure is not drawn while grading)" in "".join(o.get("text", "") for o in cell.outputs)
        assert not any(set(o.get("data", {})) & {"image/png", "text/html"} for o in cell.outputs)


def test_grades_csv_per_assignment_and_class_overview(graded_class, tmp_path):
    _, results, _ = graded_class
    grading.write_class_csv(tmp_path / "grades.csv", results)
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert {(r["student"], r["assignment"]) for r in rows} >= {(example_class.CORRECT_STUDENT, n) for n in NAMES}
    per_step = {r["student"]: r for r in csv.DictReader(open(tmp_path / f"grades-{ASSIGNMENT}.csv"))}
    student, key = _sampled_bank_mistake()
    assignment = assignments.get(ASSIGNMENT)
    model = grade_variant(assignment, assignment.mistakes[key])
    for step in assignment.steps:
        assert per_step[student][grading.step_name(step.grade_id, ASSIGNMENT)] == f"{model[step.grade_id].score:g}"
    assert per_step[student]["mistakes"] == key
    assert per_step[example_class.UNTOUCHED]["note"] == "unanswered"
    assert per_step["hostile-empty-file"]["total"] == "" and "empty file" in per_step["hostile-empty-file"]["note"]
    overview = example_class.overview(results)
    assert overview.splitlines()[0].split() == ["student", *(n.split("_", 1)[0] for n in NAMES)]


@pytest.fixture
def busy_machine():
    """A process burning CPU for the test's duration (output then arrives in more, smaller pieces); killed after."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield burner
    finally:
        burner.kill()
        burner.wait()


def test_grading_the_same_submission_twice_gives_identical_scores_and_messages(graded_class, tmp_path, busy_machine):
    course, results, _ = graded_class
    again = grading.copy_course(REPO, tmp_path / "again")
    twice = [_sampled_bank_mistake()[0], "hostile-forged-results"]
    for student in twice:
        shutil.copytree(course / "submitted" / student, again / "submitted" / student)
    _, rows = grading.grade_class(again, ASSIGNMENT, twice)
    first = {r.student: r for r in results[ASSIGNMENT][1]}
    for row in rows:
        assert (row.steps, row.named) == (first[row.student].steps, first[row.student].named)
        old = read(course / "autograded" / row.student / ASSIGNMENT / NOTEBOOK)
        new = read(again / "autograded" / row.student / ASSIGNMENT / NOTEBOOK)
        texts = lambda nb: [o.get("text") for c in nb.cells if c.cell_type == "code" for o in c.outputs]  # noqa: E731
        assert texts(old) == texts(new)


def test_printed_output_reaches_the_graded_notebook_as_one_stream_output(graded_class):
    """However the kernel's output was split into messages (it depends on timing), the cell shows one piece."""
    course, _, _ = graded_class
    for path in (course / "autograded").glob("*/*/*.ipynb"):
        for cell in read(path).cells:
            outputs = cell.get("outputs", []) if cell.cell_type == "code" else []
            for before, after in zip(outputs, outputs[1:]):
                assert not (before.output_type == after.output_type == "stream" and before.name == after.name), path


def test_feedback_shows_no_frame_of_the_course_and_no_path_of_the_grading_machine(graded_class):
    course, _, _ = graded_class
    machine = [str(REPO), str(course), sys.prefix, str(Path(nbformat.__file__).parent.parent)]
    checked = 0
    for html in (course / "feedback").glob("*/*/*.html"):
        if html.parts[-3].startswith("hostile-"):
            continue  # their own code names paths of this machine (they try to read the course directory)
        text = html.read_text()
        for marker in [*machine, "worked.py", "self_check.py", "attention_lab/", "skipping hidden"]:
            assert marker not in text, (html, marker)
        checked += "Traceback" in text
    assert checked >= 5  # notebooks whose self-checks failed: their tracebacks keep the notebook's own frames


def test_untouched_answers_say_not_answered_yet_and_the_table_says_unanswered(graded_class):
    course, results, _ = graded_class
    steps, rows = results[ASSIGNMENT]
    ben = next(r for r in rows if r.student == example_class.UNTOUCHED)
    assert ben.note == "unanswered"
    lea = next(r for r in rows if r.student == "lea-softmax-unfinished")
    assert lea.note == "unanswered: softmax"
    assert re.search(rf"^ben-untouched .*0/{hostile.FULL:g}\s+unanswered$", grading.format_table(steps, rows, ASSIGNMENT),
                     re.M)
    html = (course / "feedback" / example_class.UNTOUCHED / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "softmax: not answered yet (it still raises NotImplementedError)" in html
    assert "raised NotImplementedError: " not in html and "raised NotImplementedError:  " not in html


def test_an_unfinished_earlier_function_costs_only_its_own_step_under_nbgrader(graded_class):
    """The stand-in passes run in the sandboxed kernel after the last cell."""
    course, results, _ = graded_class
    lea = next(r for r in results[ASSIGNMENT][1] if r.student == "lea-softmax-unfinished")
    # lea's softmax is the stub (and her entropy ceiling is in bits: that question's point, nothing else)
    assert {g for g, (score, points) in lea.steps.items() if score < points} == {"test_softmax", "question_entropy_ceiling"}
    html = (course / "feedback" / "lea-softmax-unfinished" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "Graded on its own: softmax, from an earlier step, is wrong or unfinished" in " ".join(html.split())


def test_table_lines_up_graded_and_ungraded_students():
    rows = [grading.StudentResult("amy", {"test_softmax": (1.5, 2.0)}, named=["softmax_no_max_subtraction"]),
            grading.StudentResult("bob", None, "not graded: notebook.ipynb is an empty file")]
    table = grading.format_table(["test_softmax"], rows, ASSIGNMENT).splitlines()
    assert table[0].split() == ["student", "softmax", "total", "notes"]
    assert table[2].split() == ["amy", "1.5/2", "1.5/2", "softmax_no_max_subtraction"]
    assert table[3].split()[:3] == ["bob", "–", "–"] and table[3].endswith("is an empty file")


def test_make_grade_with_nothing_submitted_says_what_to_do(tmp_path, capsys):
    shutil.copytree(REPO / "source", tmp_path / "source")
    assert grading.main(["--course-dir", str(tmp_path)]) == 0
    assert "submitted/<student>/<assignment>/" in capsys.readouterr().out


def test_demo_prints_tables_overview_and_where_the_results_are(monkeypatch, tmp_path, capsys, graded_class):
    _, results, _ = graded_class
    students = {n: example_class.end_to_end_sample(assignments.get(n)) for n in NAMES}
    example = {n: (steps, [r for r in rows if r.student in students[n]]) for n, (steps, rows) in results.items()}
    monkeypatch.setattr(example_class, "run_demo", lambda output, names: example)
    assert example_class.main(["--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out
        for student in students[name]:
            assert student in out
    assert "class overview" in out and "grades.csv" in out and "feedback" in out
    for name in NAMES:
        assert str(tmp_path / "class-report" / name / "report.html") in out


def test_class_report_of_a_graded_class_names_its_mistakes_and_feedback_names_the_grader(graded_class):
    from autograder.examples.hostile_payloads import active_content
    from autograder.nbgrader import class_report, class_report_page, fingerprints

    course, results, _ = graded_class
    label = fingerprints.grader_label(course)
    for name, (_, rows) in results.items():
        gathered = class_report.gather(course, name)
        page = class_report_page.render(gathered)
        assert active_content(page) == [] and "<script" not in page.lower()
        assert gathered.graded_by == {label: len(gathered.graded)}
        named = {key for row in rows for key in row.named}
        assert {m.key for m in gathered.frequent} == named and named, name
        for key in named:
            assert f"<code>{key}</code>" in page[page.index('id="frequent-mistakes"'):]
        feedback = next((course / "feedback" / rows[0].student / name).glob("*.html")).read_text()
        assert label in feedback, f"{name}: the feedback does not name the grader's version"


def test_the_report_meets_every_goal_and_the_committed_copy_is_current(graded_class):
    _, results, outcomes = graded_class
    # the run graded a sample of the example students: the others' rows come from the in-process model, and
    # equal the committed rows `make report` wrote from nbgrader runs of every student. The in-process rows
    # grade a07's memory step on its stand-in (the real T = 20 000 case for every variant took two minutes;
    # tests/test_tiled_attention_bank.py shows every answer gets the same verdict on both)
    with memory_stand_in():
        built = report.build_from(results, outcomes, modelled=True)
    missed = [row for rows in (built.correct, built.mistakes, built.hostile, built.end_to_end)
              for row in rows if not row.ok]
    assert not missed, "\n".join(f"{r.assignment} {r.name}: {r.detail}" for r in missed)
    assert report.REPORT.read_text() == report.render(built), "reports/grader_report.md is stale: run `make report`"
