"""Questions that check understanding (issue 12 §2): answer formats, grading, the notebooks' cells, the release.

Every question of every assignment is graded in-process here, through the real pipeline (request, probe,
screening, :class:`~autograder.grader.comparison.Grader`); tests/test_grading.py grades assignment 1's
questions end to end with nbgrader in the sandbox (an answer written differently and a known wrong answer) and
checks the written answer is left to the instructor.
"""

import re
import tomllib

import pytest

from attention_lab.core import probe
from attention_lab.core.questions import AnswerFormatError, Choice, Members, Number, check_format
from attention_lab.core.worked import SelfCheckFailed
from autograder import assignments
from autograder.grader.in_process import grade_answers, points_of
from autograder.grader.questions import Questions, QuestionsFileError
from autograder.nbgrader.notebook_cells import nbgrader_meta, read_json
from conftest import REPO

ASSIGNMENTS = assignments.all_assignments()
QUESTIONS = [(name, q.name) for name, a in ASSIGNMENTS.items() for q in a.questions]


def question(name, short):
    return next(q for q in ASSIGNMENTS[name].questions if q.name == short)


def notebook(folder, name):
    return read_json(REPO / folder / name / ASSIGNMENTS[name].notebook)


def cell(nb, grade_id):
    (found,) = [c for c in nb["cells"] if nbgrader_meta(c).get("grade_id") == grade_id]
    return found


def graded(name, answer_cells):
    return grade_answers(ASSIGNMENTS[name], answer_cells)


# ---------------------------------------------------------------- the formats, read the same on both sides

@pytest.mark.parametrize("value,read", [("b", "b"), (" B ", "b"), ("C\n", "c")])
def test_a_choice_ignores_case_and_spaces(value, read):
    assert Choice("abcd").read(value) == read


@pytest.mark.parametrize("value", ["e", "ab", "", 2, None, ["b"], True])
def test_a_choice_is_one_of_its_letters_in_quotes(value):
    with pytest.raises(AnswerFormatError):
        Choice("abcd").read(value)


@pytest.mark.parametrize("value", [{3, 1}, [1, 3], (3, 1, 1), frozenset({1.0, 3}), [3.0, 1]])
def test_a_set_is_any_order_and_ints_or_whole_floats(value):
    assert Members(4).read(value) == frozenset({1, 3})


@pytest.mark.parametrize("value", [1, "13", [1.5], [4], [-1], [True], {"a"}, None, {1: 2}])
def test_a_set_of_numbers_holds_whole_numbers_in_range(value):
    with pytest.raises(AnswerFormatError):
        Members(4).read(value)


def test_a_set_of_letters_ignores_case_and_spaces():
    assert Members("abc").read([" A", "c"]) == frozenset({"a", "c"})


@pytest.mark.parametrize("value", ["2", True, float("nan"), float("inf"), None, [2]])
def test_a_number_is_a_finite_int_or_float(value):
    with pytest.raises(AnswerFormatError):
        Number(0.01).read(value)


def test_a_number_is_right_within_its_tolerance_only():
    number = Number(0.01)
    assert number.same(number.read(2), 2.0) and number.same(2.009, 2.0) and not number.same(2.02, 2.0)


def test_a_declaration_must_explain_every_wrong_choice_and_its_other_spellings_must_be_right():
    with pytest.raises(ValueError, match="every wrong choice"):
        Questions().add("q", "q", Choice("abc"), "a", wrong={"b": "why b is wrong"})
    with pytest.raises(ValueError, match="is the right one"):
        Questions().add("q", "q", Number(0.1), 2, wrong={2.05: "close"})
    with pytest.raises(ValueError, match="not another way"):
        Questions().add("q", "q", Members(3), {0}, wrong={frozenset(): "x"}, also_correct=("[1]",))
    with pytest.raises(AnswerFormatError):
        Questions().add("q", "q", Choice("ab"), "z", wrong={})


def test_questions_toml_reads_every_format_with_its_answers_wrong_answers_and_spellings(tmp_path):
    path = tmp_path / "questions.toml"
    path.write_text('''
[[question]]
name = "rows"
title = "rows"
format = "members"
of = 4
answer = [2, 0]
also_correct = ["[0, 2]"]
[[question.wrong]]
answer = []
why = "none is wrong"

[[question]]
name = "pick"
title = "pick"
format = "choice"
letters = "abc"
answer = "b"
[[question.wrong]]
answer = "a"
why = "not a"
[[question.wrong]]
answer = "c"
why = "not c"

[[question]]
name = "gain"
title = "gain"
format = "number"
tolerance = 0.005
answer = 0.25
otherwise = "look again"
[[question.wrong]]
answer = 0
why = "not zero"
''', encoding="utf-8")
    declared = Questions()
    declared.add("rows", "rows", Members(4), {0, 2}, wrong={frozenset(): "none is wrong"}, also_correct=("[0, 2]",))
    declared.add("pick", "pick", Choice("abc"), "b", wrong={"a": "not a", "c": "not c"})
    declared.add("gain", "gain", Number(0.005), 0.25, wrong={0: "not zero"}, otherwise="look again")
    assert list(Questions.load(path)) == list(declared)


@pytest.mark.parametrize("text, complaint", [
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "essay"\nanswer = 1\n', "format must be one of"),
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "number"\nanswer = 1\n', "missing ['tolerance']"),
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "number"\ntolerance = 0.1\nanswer = 1\npoints = 2\n',
     "unknown ['points']"),
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "number"\ntolerance = 0.1\nanswer = 1\n'
     '[[question.wrong]]\nanswer = 1.05\nwhy = "close"\n', "is the right one"),
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "number"\ntolerance = 0.1\nanswer = 1\n'
     '[[question.wrong]]\nanswer = 3\n', "exactly the keys answer and why"),
    ('[[question]]\nname = "q"\ntitle = "q"\nformat = "choice"\nletters = "ab"\nanswer = "a"\n',
     "every wrong choice"),
    ("[[question]\n", "not valid TOML"),
    ('[questions]\nname = "q"\n', "only [[question]] tables"),
])
def test_a_questions_file_that_is_not_well_formed_is_refused_in_one_line_that_names_the_file(tmp_path, text, complaint):
    path = tmp_path / "questions.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(QuestionsFileError) as refused:
        Questions.load(path)
    message = str(refused.value)
    assert message.startswith(f"{path}") or message.startswith("questions.toml, question 1: "), message
    assert complaint in message and "\n" not in message.strip(), message


def test_every_graded_assignment_reads_its_questions_from_questions_toml_which_ships_with_the_package():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    package = REPO / "autograder"
    shipped = {p for pattern in config for p in package.glob(pattern)}
    for name in ASSIGNMENTS:
        path = package / "assignments" / assignments.folder_of(name) / "questions.toml"
        assert path in shipped, f"{path} is not in pyproject.toml's package data"
        assert list(Questions.load(path)) == list(ASSIGNMENTS[name].questions), name


# ---------------------------------------------------------------- every question, graded

def test_every_assignment_asks_at_least_two_questions_of_named_answer_types():
    for name, assignment in ASSIGNMENTS.items():
        assert len(assignment.questions) >= 2, name
        for q in assignment.questions:
            assert q.grade_id.startswith("question_") and q.variable == f"answer_{q.name}"
            assert len(q.wrong) >= 3 and q.also_correct, f"{name}/{q.name}: typical wrong answers and other spellings"


@pytest.mark.parametrize("name,short", QUESTIONS)
def test_every_way_of_writing_the_answer_earns_the_point_and_every_known_wrong_answer_is_named(name, short):
    q, assignment = question(name, short), ASSIGNMENTS[name]
    points = points_of(assignment)[q.grade_id]
    for code in q.also_correct:
        result = graded(name, {q.variable: f"{q.variable} = {code}\n"})[q.grade_id]
        assert result.score == points and result.named == [], (code, result.text())
    for wrong, why in q.wrong.items():
        key = q.mistake_key(wrong)
        result = graded(name, dict(assignment.mistakes[key].cells))
        lost = {g for g, r in result.items() if r.score < r.points}
        assert lost == {q.grade_id}, key  # a wrong answer costs its question's point and nothing else
        text = " ".join(result[q.grade_id].text().split())
        assert result[q.grade_id].named == [key] and " ".join(why.split()) in text
        assert f"your answer {q.format.show(wrong)} is not right" in text


@pytest.mark.parametrize("name,short", QUESTIONS)
def test_an_unanswered_or_malformed_answer_scores_zero_and_says_why(name, short):
    q = question(name, short)
    unanswered = graded(name, {q.variable: "raise NotImplementedError()\n"})[q.grade_id]
    assert unanswered.score == 0 and unanswered.unanswered and "not answered yet" in unanswered.text()
    for code, says in [("object()", "but it is a builtins.object"), ("'" + "x" * 5000 + "'", "but it is"),
                       ("None", "None")]:
        result = graded(name, {q.variable: f"{q.variable} = {code}\n"})[q.grade_id]
        text = " ".join(result.text().split())
        assert result.score == 0 and says in text and len(text) < 600, text


def test_an_answer_whose_equality_lies_is_only_a_name_to_the_grader():
    liar = "class Liar(str):\n    def __eq__(self, other): return True\n    def strip(self): return 'b'\n" \
           "answer_head_shape = Liar('z')\n"
    result = graded("02_multi_head_attention", {"answer_head_shape": liar})["question_head_shape"]
    assert result.score == 0 and "Liar" in result.text()


def test_the_probe_sends_a_set_as_its_members_and_reads_nothing_else():
    sent = probe.collect({"answer_x": {3, 1}, "answer_y": frozenset()},
                         {"grade_id": "question_x", "cases": [
                             {"function": "answer_x", "reads": True, "args": [], "kwargs": {}, "seconds": 1},
                             {"function": "answer_y", "reads": True, "args": [], "kwargs": {}, "seconds": 1},
                             {"function": "answer_z", "reads": True, "args": [], "kwargs": {}, "seconds": 1}]})
    x, y, z = sent["results"]
    assert x["status"] == "returned" and sorted(x["value"]["list"]) == [1, 3] and x["args_after"] == []
    assert y["value"] == {"list": []} and z["status"] == "missing"


# ---------------------------------------------------------------- the notebooks say what the grader does

@pytest.mark.parametrize("name,short", QUESTIONS)
def test_the_source_cells_of_a_question_name_its_type_and_points_and_check_the_format_only(name, short):
    q, nb = question(name, short), notebook("source", name)
    ids = [nbgrader_meta(c).get("grade_id") for c in nb["cells"]]
    answer, check, test = (ids.index(g) for g in (q.variable, f"check_{q.name}", q.grade_id))
    assert answer + 1 == check and check + 1 == test, "answer cell, its check, its autograder cell, in that order"
    prose = nb["cells"][answer - 1]["source"]
    assert f"(1 point, graded automatically; answer type: {q.format.kind}" in prose and f"`{q.variable}`" in prose
    assert nbgrader_meta(nb["cells"][test])["points"] == points_of(ASSIGNMENTS[name])[q.grade_id] == 1
    meta = nbgrader_meta(nb["cells"][answer])
    assert meta["solution"] and not meta.get("grade") and nb["cells"][answer]["cell_type"] == "code"
    assert nb["cells"][check]["source"].endswith(f'check_format(globals(), "{q.variable}", {q.format!r})')
    table = nb["cells"][0]["source"]
    assert re.search(rf"^\| Q\d \| question: {re.escape(q.title)} \({q.format.kind}\) \| 1 \|$", table, re.M)


@pytest.mark.parametrize("name,short", QUESTIONS)
def test_the_visible_check_passes_any_well_formed_answer_right_or_wrong_and_fails_the_rest(name, short):
    q, nb = question(name, short), notebook("source", name)
    source = cell(nb, f"check_{q.name}")["source"]
    import ast

    def run(namespace):
        exec(source, namespace)

    for value in [*(ast.literal_eval(code) for code in q.also_correct), *q.wrong]:
        run({q.variable: set(value) if isinstance(value, frozenset) else value})  # the format only: no verdict
    for namespace in ({}, {q.variable: object()}, {q.variable: None}):
        with pytest.raises(SelfCheckFailed):
            run(namespace)


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_written_answer_is_optional_manual_and_worth_0_points_as_the_notebook_says(name):
    nb = notebook("source", name)
    written = [c for c in nb["cells"] if nbgrader_meta(c).get("grade_id", "").startswith("written_")]
    assert len(written) == 1
    (w,) = written
    meta = nbgrader_meta(w)
    assert w["cell_type"] == "markdown" and meta["grade"] and meta["solution"] and meta["points"] == 0
    before = nb["cells"][nb["cells"].index(w) - 1]["source"]
    assert before.startswith("**Written answer (optional, 0 points, graded by hand).**")
    assert "does not change your score" in before
    assert re.search(r"^### BEGIN SOLUTION\n\*Rubric \(for the instructor;.*\n### END SOLUTION$", w["source"], re.S)
    assert re.search(r"^\| W \| written answer \(optional, graded by hand\) \| 0 \|$", nb["cells"][0]["source"], re.M)
    intro = " ".join(c["source"] for c in nb["cells"] if "## Check your understanding" in c["source"])
    assert "1 point each, graded automatically" in intro and "0 points, graded by hand" in intro


# ---------------------------------------------------------------- nothing of an answer reaches release/

@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_released_question_cells_and_checks_carry_no_answer_and_no_rubric(name):
    source, release = notebook("source", name), notebook("release", name)
    for q in ASSIGNMENTS[name].questions:
        assert cell(release, q.variable)["source"] == "# YOUR CODE HERE\nraise NotImplementedError()"
        assert cell(release, f"check_{q.name}")["source"] == cell(source, f"check_{q.name}")["source"]
        check = cell(release, f"check_{q.name}")["source"]
        assert check == (f"from attention_lab.core.questions import {type(q.format).__name__}, check_format\n\n"
                         f'check_format(globals(), "{q.variable}", {q.format!r})'), "a format, never an answer"
        visible = cell(release, q.grade_id)["source"]
        # the format check again (an unanswered question fails its test cell too: nbgrader validate --invert)
        assert re.fullmatch(rf"# Autograder tests for question \d \(1 point\): the grader compares {q.variable} with "
                            r"the answer, outside this notebook\.\n"
                            r"# the format again, so that an unanswered question fails here too \(nbgrader validate "
                            r"--invert\)\n" + re.escape(f'check_format(globals(), "{q.variable}", {q.format!r})'),
                            visible), visible
    (written,) = [c for c in release["cells"] if nbgrader_meta(c).get("grade_id", "").startswith("written_")]
    assert written["source"] == "YOUR ANSWER HERE"
    everything = "\n".join(c["source"] for c in release["cells"])
    assert "Rubric" not in everything and "BEGIN SOLUTION" not in everything


def test_the_student_package_holds_no_answer_of_any_question():
    package = "\n".join(p.read_text() for p in (REPO / "attention_lab").rglob("*.py"))
    package += "\n".join(p.read_text() for p in (REPO / "attention_lab").rglob("*.json"))
    from autograder.grader.questions import _code

    package = " ".join(package.split())
    for name, assignment in ASSIGNMENTS.items():
        for q in assignment.questions:
            assert q.variable not in package and q.grade_id not in package, f"{name}/{q.name}"
            assert f"= {_code(q.answer)}" not in package or len(_code(q.answer)) < 4, f"{name}/{q.name}"
            for why in q.wrong.values():  # what a wrong answer misses would tell which answers are wrong
                assert " ".join(why.split())[:60] not in package, f"{name}/{q.name}"
