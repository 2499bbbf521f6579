"""Worked cases: the stored numbers (generator, encoding, freshness) and the student-side checker's messages."""

from __future__ import annotations

import dataclasses
import json
import math
import pkgutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import nbformat
import numpy as np
import pytest

import attention_lab
from attention_lab.core import worked
from autograder import assignments as discovery
from autograder.grader import worked_cases as generator
from autograder.grader.answers import answer_namespace
from autograder.assignments import all_assignments
from autograder.grader.spec import Assignment, Case, Variant
from autograder.assignments.a01_attention.bank import CORRECT, MISTAKES
from conftest import ASSIGNMENT as A1, NOTEBOOK as NB1, REPO

FUNCTIONS_1 = tuple(all_assignments()[A1].reference)  # assignment 1's functions, from its spec
WITH_WORKED_CASES = sorted(name for name, a in all_assignments().items() if a.worked_cases)


def stored_cases(function_name=None):
    return worked.worked_cases(A1, function_name)


# ---------------------------------------------------------------- encoding
def same(a, b) -> bool:
    """Equal types, dtypes, shapes and bits (NaN payloads aside), recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind != "f":
            return np.array_equal(a, b)
        return np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(a, np.floating):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


VALUES = [
    np.array([[0.1, -0.0, np.nan], [np.inf, -np.inf, 1e-308]]),
    np.array([1 / 3, 2 / 3], dtype=np.float32),
    np.array([0.1, 65504.0], dtype=np.float16),
    np.arange(6, dtype=np.int32).reshape(2, 3, 1),
    np.tril(np.ones((3, 3), dtype=bool)),
    np.zeros((0, 3)),
    np.array(2.5),
    np.float32(0.1), np.int64(7), np.bool_(True), np.float64(np.nan),
    0.1, -0.0, math.inf, math.nan, 3, True, None, "text",
    (np.ones(2), (1.5, None)), [1, 2.5], {"axis": -1, "x": np.eye(2)},
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__ + str(getattr(v, "dtype", "")))
def test_values_round_trip_bit_for_bit_through_strict_json(value):
    text = json.dumps(worked.encode(value), allow_nan=False)  # no NaN/Infinity tokens: standard JSON
    assert same(worked.decode(json.loads(text)), value)


@pytest.mark.parametrize("value", [np.array([1j]), np.array([object()]), {1, 2}, object(), {1: 2}])
def test_unsupported_values_are_refused(value):
    with pytest.raises(TypeError, match="cannot store"):
        worked.encode(value)


def test_decode_gives_a_fresh_array_each_time():
    data = worked.encode(np.ones(3))
    first = worked.decode(data)
    first[:] = 7
    assert np.array_equal(worked.decode(data), np.ones(3))


# ---------------------------------------------------------------- the generator and the committed files
def test_generation_is_deterministic():
    assignment = all_assignments()[A1]
    text = generator.render(assignment)
    assert generator.render(assignment) == text
    data = json.loads(text)
    assert [case["description"] for case in data["cases"]] == [c.description for c in assignment.worked_cases]
    for case in data["cases"]:
        assert [m["key"] for m in case["mistakes"]] == sorted(m["key"] for m in case["mistakes"])


@pytest.mark.parametrize("name", WITH_WORKED_CASES)
def test_committed_worked_cases_are_current(name):
    """``python -m autograder worked-cases --check`` for this assignment; on failure, run the command."""
    assert generator.file_problems(generator.OUTPUT, all_assignments()[name]) == []


def test_no_left_over_worked_case_files():
    assert generator.left_overs(generator.OUTPUT) == []


def test_worked_cases_ship_with_the_package():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "attention_lab*" in config["packages"]["find"]["include"]
    patterns = config["package-data"]["attention_lab"]
    package = Path(attention_lab.__file__).parent
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    stored = {generator.OUTPUT / generator.file_name(name) for name in WITH_WORKED_CASES}
    assert stored and stored <= shipped
    assert generator.OUTPUT == package


@pytest.fixture
def only_a_small_assignment_1(monkeypatch):
    """Discovery finds just assignment 1 with its first two worked cases (independent of other assignments)."""
    real = all_assignments()[A1]
    small = dataclasses.replace(real, worked_cases=real.worked_cases[:2])
    monkeypatch.setattr(discovery, "all_assignments", lambda: {A1: small})
    return small


def test_check_command_reports_missing_stale_and_left_over_files(tmp_path, only_a_small_assignment_1, capsys):
    out = tmp_path / "worked_cases"
    assert generator.main(["--check", "--output", str(out)]) == 1
    assert "is missing" in capsys.readouterr().err
    assert generator.main(["--output", str(out)]) == 0
    assert generator.main(["--check", "--output", str(out)]) == 0
    path = out / generator.file_name(A1)
    path.write_text(path.read_text().replace("0.3333333333333333", "0.3333", 1))
    assert generator.main(["--check", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "is stale" in err and "run `python -m autograder worked-cases`" in err
    (out / "a99_gone").mkdir()
    (out / "a99_gone" / "worked_cases.json").write_text("{}")
    generator.main(["--output", str(out)])
    assert not (out / "a99_gone" / "worked_cases.json").exists()
    assert generator.main(["--check", "--output", str(out)]) == 0


def test_last_bit_differences_between_cpus_are_not_stale(tmp_path, only_a_small_assignment_1):
    generator.write(tmp_path)
    path = tmp_path / generator.file_name(A1)
    text = path.read_text()
    third = 1 / 3
    path.write_text(text.replace(repr(third), repr(float(np.nextafter(third, 1.0))), 1))
    assert path.read_text() != text
    assert generator.problems(tmp_path) == []
    shifted = path.read_text()
    # regenerating on this CPU leaves the other CPU's file as it is (a fresh clone's `worked-cases` changes nothing)
    assert generator.write(tmp_path) == [f"unchanged {path}"] and path.read_text() == shifted
    path.write_text(text.replace(repr(third), "0.3333", 1))  # a real change is still written
    assert generator.write(tmp_path) == [f"wrote {path}"] and path.read_text() == text


# ---------------------------------------------------------------- the generator on a fake course
def _fake_course(tmp_path: Path, solutions: dict[str, str]) -> Path:
    nb = nbformat.v4.new_notebook()
    for grade_id, body in solutions.items():
        cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\n" + textwrap.dedent(body) + "### END SOLUTION\n")
        cell.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False, "grade_id": grade_id,
                                     "schema_version": 3}
        nb.cells.append(cell)
    folder = tmp_path / "source" / "99_fake"
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "fake.ipynb"))
    return tmp_path


def _reference_halve(x):
    x = np.asarray(x, dtype=float)
    if np.any(x < 0):
        raise ValueError("x must be non-negative")
    return x / 2


def _fake_assignment(cases, mistakes) -> Assignment:
    return Assignment(name="99_fake", notebook="fake.ipynb", reference={"halve": _reference_halve}, steps=(),
                      correct={}, mistakes=mistakes, worked_cases=tuple(cases))


SOLUTION = "def halve(x):\n    if np.any(x < 0):\n        raise ValueError('negative')\n    return x / 2\n"
FAKE_MISTAKES = {
    "doubles": Variant("doubles instead of halving", {"halve": "def halve(x):\n    return x * 2\n"},
                       frozenset({"test_halve"}), hint="Halving divides."),
    "same_values": Variant("float32, same values", {"halve": "def halve(x):\n    return (x / 2).astype(np.float32)\n"},
                           frozenset({"test_halve"}), hint="(never stored)"),
    "crashes": Variant("crashes", {"halve": "def halve(x):\n    raise KeyError('x')\n"},
                       frozenset({"test_halve"}), hint="Do not crash."),
    "returns_an_object": Variant("returns an object that JSON cannot hold",
                                 {"halve": "def halve(x):\n    return object()\n"},
                                 frozenset({"test_halve"}), hint="(never stored)"),
}


def test_generator_stores_only_distinguishable_mistakes_and_expected_exceptions(tmp_path):
    course = _fake_course(tmp_path, {"halve": SOLUTION})
    assignment = _fake_assignment([
        Case("halve [2, 4]", "halve", (np.array([2.0, 4.0]),)),
        Case("negative input raises", "halve", (np.array([-1.0]),), raises="ValueError"),
    ], FAKE_MISTAKES)
    data = json.loads(generator.render(assignment, course))
    first, second = data["cases"]
    assert first["arg_names"] == ["x"] and first["raises"] is None
    assert same(worked.decode(first["expected"]), np.array([1.0, 2.0]))
    assert [(m["key"], "raises" in m) for m in first["mistakes"]] == [("crashes", True), ("doubles", False)]
    assert first["mistakes"][0]["raises"] == "KeyError" and first["mistakes"][1]["hint"] == "Halving divides."
    assert second["expected"] is None and second["raises"] == "ValueError"
    assert {m["key"] for m in second["mistakes"]} == {"crashes", "doubles", "same_values"}  # each fails to raise it

    # the student side on these stored cases
    namespace = answer_namespace("99_fake", "fake.ipynb", {"halve": FAKE_MISTAKES["doubles"].cells["halve"]}, course)
    with pytest.raises(worked.SelfCheckFailed, match="Halving divides"):
        worked.check_one_case(first, namespace["halve"])
    with pytest.raises(worked.SelfCheckFailed, match=r"should raise ValueError on these inputs, but it returned"):
        worked.check_one_case(second, lambda x: x / 2)
    with pytest.raises(worked.SelfCheckFailed, match=r"(?s)raised KeyError.*known mistake: crashes"):
        worked.check_one_case(second, answer_namespace("99_fake", "fake.ipynb", FAKE_MISTAKES["crashes"].cells,
                                                       course)["halve"])

    class NegativeInput(ValueError):
        pass

    def raises_a_subclass(x):
        raise NegativeInput("negative")

    worked.check_one_case(second, raises_a_subclass)  # a subclass of the named exception is fine


@pytest.mark.parametrize("case, solution, message", [
    (Case("reference raises", "halve", (np.array([-1.0]),)), SOLUTION, "the reference halve raises"),
    (Case("expects an exception", "halve", (np.array([1.0]),), raises="ValueError"), SOLUTION, "expects ValueError"),
    (Case("unknown function", "third", (1.0,)), SOLUTION, "no reference"),
    (Case("wrong arguments", "halve", (1.0, 2.0)), SOLUTION, "does not fit halve's signature"),
    (Case("solution disagrees", "halve", (np.array([2.0]),)), "def halve(x):\n    return x\n", "disagrees"),
])
def test_generator_refuses_unusable_worked_cases(tmp_path, case, solution, message):
    course = _fake_course(tmp_path, {"halve": solution})
    with pytest.raises(generator.WorkedCaseError, match=message):
        generator.render(_fake_assignment([case], {}), course)


def test_a_broken_assignment_does_not_hide_the_others(tmp_path, monkeypatch, capsys):
    real = all_assignments()[A1]
    small = dataclasses.replace(real, worked_cases=real.worked_cases[:1])
    broken = dataclasses.replace(small, name="98_no_notebook")
    monkeypatch.setattr(discovery, "all_assignments", lambda: {A1: small, "98_no_notebook": broken})
    assert generator.main(["--output", str(tmp_path)]) == 1
    assert "FAILED 98_no_notebook" in capsys.readouterr().out
    assert (tmp_path / generator.file_name(A1)).is_file()


# ---------------------------------------------------------------- assignment 1: mistakes named, correct answers pass
def _mistake_function_pairs():
    pairs = set()
    for case in stored_cases():
        for mistake in case["mistakes"]:
            pairs.add((mistake["key"], case["function"]))
    return sorted(pairs)


def test_every_known_mistake_is_distinguishable_in_its_own_function():
    seen = {m["key"] for case in stored_cases() for m in case["mistakes"] if case["function"] in m["cells"]}
    assert seen == set(MISTAKES)


def test_every_mistake_has_a_hint():
    assert all(variant.hint.strip() for variant in MISTAKES.values())


@pytest.mark.parametrize("key, function_name", _mistake_function_pairs())
def test_check_worked_cases_names_each_distinguishable_mistake(key, function_name):
    mistake = MISTAKES[key]
    function = answer_namespace(A1, NB1, dict(mistake.cells))[function_name]
    with pytest.raises(worked.SelfCheckFailed) as failure:
        worked.check_worked_cases(A1, function_name, function)
    message = str(failure.value)
    assert "This looks like a known mistake" in message
    assert mistake.description in message and mistake.hint in message
    if function_name not in mistake.cells:  # a mistake in an earlier function, seen through this one
        assert f"usually made in {', '.join(sorted(mistake.cells))}" in message


@pytest.mark.parametrize("variant", ["source solution", *sorted(CORRECT)])
def test_correct_answers_pass_every_worked_case(variant, capsys):
    namespace = answer_namespace(A1, NB1, dict(CORRECT[variant].cells) if variant in CORRECT else {})
    for name in FUNCTIONS_1:
        worked.check_worked_cases(A1, name, namespace[name])
    assert capsys.readouterr().out.count("✓") == len(FUNCTIONS_1)


def test_every_function_of_assignment_1_has_worked_cases():
    assert {case["function"] for case in stored_cases()} == set(FUNCTIONS_1)


# ---------------------------------------------------------------- messages for results that match no mistake
def _softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __repr__(self):
        raise RuntimeError("a learner's repr is never needed")


class ClaimsEqual(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(other), dtype=bool)


def _hang(x, axis=-1):
    while True:
        pass


@pytest.mark.parametrize("function, words", [
    (lambda x, axis=-1: AlwaysEqual(), "wrong type for the result: expected a NumPy array, got AlwaysEqual"),
    # an ndarray subclass is refused as the grader refuses it, whatever its __eq__ claims
    (lambda x, axis=-1: (_softmax(x, axis) + 0.5).view(ClaimsEqual), "expected a plain NumPy array, got a "
                                                                     "test_worked_cases.ClaimsEqual (a subclass"),
    (lambda x, axis=-1: np.full(np.shape(x), np.nan), "NaN or inf in the result at (0, 0), (0, 1), (0, 2), (1, 0)"),
    (lambda x, axis=-1: _softmax(x, axis).T, "wrong shape for the result: expected (2, 3), got (3, 2) (the expected "
                                             "shape with its last two axes swapped"),
    (lambda x, axis=-1: _softmax(x, axis).astype(int), "expected a floating-point array, got dtype int"),
    (lambda x, axis=-1: [list(r) for r in _softmax(x, axis)], "expected a NumPy array, got list"),
    (lambda x, axis=-1: 2 * _softmax(x, axis), "the result is the expected one times a constant k ≈ 2"),
    (lambda x, axis=-1: _softmax(x, axis) ** 2, "rows don't sum to 1 (sums [0.3333, 0.5105])"),
    (lambda x, axis=-1: 1 / 0, "raised ZeroDivisionError: division by zero"),
    (lambda x, axis=-1: _NOT_DEFINED, "is not defined — run the cell that defines it first"),  # noqa: F821
])
def test_wrong_softmax_results_get_plain_words(function, words):
    with pytest.raises(worked.SelfCheckFailed) as failure:
        worked.check_worked_cases(A1, "softmax", function)
    message = str(failure.value)
    assert words in message
    assert 'fails the worked case "softmax of [[0, 0, 0], [1, 2, 3]]"' in message
    assert "call:     softmax(x=[[0, 0, 0], [1, 2, 3]])" in message
    assert "expected: [[0.3333, 0.3333, 0.3333], [0.09003, 0.2447, 0.6652]]" in message
    assert "known mistake" not in message


def test_a_hang_is_interrupted_with_a_plain_message():
    with pytest.raises(worked.SelfCheckFailed, match=r"did not finish within 0.3 s — look for a loop that never"):
        worked.check_worked_cases(A1, "softmax", _hang, seconds=0.3)


def test_a_function_that_modifies_its_input_is_told_so_by_name_and_never_spoils_the_stored_inputs():
    def in_place(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=axis, keepdims=True)
        return x

    messages = []
    for _ in range(2):
        with pytest.raises(worked.SelfCheckFailed) as failure:
            worked.check_worked_cases(A1, "softmax", in_place)
        messages.append(str(failure.value))
    assert messages[0] == messages[1]  # the second run sees the same stored inputs
    assert "problem:  softmax modified its argument x in place; compute a new array instead" in messages[0]
    assert "call:     softmax(x=[[0, 0, 0], [1, 2, 3]])" in messages[0]


def test_prints_and_warnings_of_the_function_are_discarded(capfd):
    def noisy(x, axis=-1):
        print("debug", file=sys.stderr)
        np.log(np.zeros(1))
        return _softmax(x, axis)

    worked.check_worked_cases(A1, "softmax", noisy)
    out, err = capfd.readouterr()
    assert err == "" and "debug" not in out


def test_future_weight_and_an_allowed_future_position_are_named():
    def leaky_attention(Q, K, V, mask=None, scale=True):
        w = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])  # rows sum to 1, row 0 sees key 1
        return w @ V, w

    with pytest.raises(worked.SelfCheckFailed, match=r"a future position has weight \(key j > query i\) at \(0, 1\)"):
        worked.check_worked_cases(A1, "scaled_dot_product_attention", leaky_attention)
    with pytest.raises(worked.SelfCheckFailed, match=r"a future position is allowed .* at \(0, 1\), \(0, 2\), \(1, 2"):
        worked.check_worked_cases(A1, "causal_mask", lambda T: np.ones((T, T), dtype=bool))


@pytest.mark.parametrize("got, want, words", [
    (np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([[1.0, 0.0], [0.5, 0.5]]), "a future position has weight"),
    (np.array([[0.2, 0.2], [0.4, 0.2]]), np.array([[1.0, 0.0], [0.5, 0.5]]), "rows don't sum to 1 (sums [0.4, 0.6])"),
    (np.array([[0.9, 0.1], [0.1, 0.9]]), np.array([[0.8, 0.2], [0.2, 0.8]]), None),
    (np.array([[0.2, 0.6], [0.8, 0.4]]), np.array([[0.2, 0.8], [0.6, 0.4]]),
     "the values along axis 0 sum to 1 instead of rows: normalised along the wrong axis"),
    (np.array([-1.0, -2.0]), np.array([1.0, 2.0]), "k ≈ -1 (the sign is flipped)"),
    (np.array([[False, True], [True, True]]), np.array([[True, False], [True, True]]),
     "a position may not attend to itself"),
    ((np.ones(2), np.array([0.5, 0.5])), (np.ones(2), np.array([0.0, 1.0])), "entries that should be exactly 0 are "
                                                                             "not, at 0"),
])
def test_failing_properties(got, want, words):
    found = worked.failing_properties(got, want)
    if words is None:
        assert found == []
    else:
        assert any(words in line for line in found), found


def test_a_case_that_must_not_warn():
    case = {"function": "f", "description": "large logits, no warning", "arg_names": ["x"],
            "args": worked.encode((np.array([1000.0, 0.0]),)), "kwargs": {}, "outputs": ["the result"],
            "rtol": 1e-4, "atol": 1e-6, "raises": None, "no_warnings": True, "exact_dtype": False,
            "expected": worked.encode(np.array([1.0, 0.0])), "mistakes": []}
    worked.check_one_case(case, _softmax)

    def clipped(x, axis=-1):
        return np.nan_to_num(np.exp(x) / np.exp(x).sum(), nan=1.0)

    with pytest.raises(worked.SelfCheckFailed, match="returned the right result but warned: overflow"):
        worked.check_one_case(case, clipped)


def test_unknown_function_and_assignment_are_named():
    with pytest.raises(LookupError, match="no worked cases for nothing_here"):
        worked.check_worked_cases(A1, "nothing_here", _softmax)
    with pytest.raises(FileNotFoundError, match="python -m autograder worked-cases"):
        worked.check_worked_cases("00_no_such_assignment", "softmax", _softmax)


# ---------------------------------------------------------------- the student package stands alone
STUDENT_MODULES = sorted(m.name for m in pkgutil.walk_packages(attention_lab.__path__, "attention_lab."))


def test_the_student_package_never_imports_autograder():
    code = ("import importlib, sys\n"
            f"for name in {STUDENT_MODULES!r}:\n"
            "    importlib.import_module(name)\n"
            "leaked = sorted(m for m in sys.modules if m == 'autograder' or m.startswith('autograder.'))\n"
            "print(leaked)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO / "tests",
                         env={"OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize("module", STUDENT_MODULES)
def test_no_student_module_mentions_autograder_in_an_import(module):
    import ast
    import importlib

    source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        assert not any(n == "autograder" or n.startswith("autograder.") for n in names), (module, names)
