"""Assignment 3's visible self-checks: correct answers pass with ✓ lines; each known mistake is named with its hint,
or the failing property is said in plain words."""

import numpy as np
import pytest

from attention_lab.a03_positional import checks as pc
from attention_lab.core.worked import SelfCheckFailed
from autograder.grader.answers import answer_namespace
from autograder.assignments.a03_positional.spec import ASSIGNMENT, CORRECT, MISTAKES

NAME, NOTEBOOK = ASSIGNMENT.name, ASSIGNMENT.notebook


def run_checks(namespace):
    """Every self-check of the notebook on the functions in ``namespace``, in notebook order."""
    pc.check_sinusoidal_positional_encoding(namespace["sinusoidal_positional_encoding"])
    pc.check_dot_product_by_offset(namespace["dot_product_by_offset"])
    pc.check_offset_rotation(namespace["offset_rotation"])
    pc.check_from_assignment_1(namespace["softmax"], namespace["scaled_dot_product_attention"])
    pc.check_self_attention(namespace["self_attention"])
    pc.check_add_positions(namespace["add_positions"])
    pc.check_permutation_gap(namespace["permutation_gap"])


def test_the_source_solution_passes_every_check_with_tick_lines(capsys):
    run_checks(answer_namespace(NAME, NOTEBOOK))
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("✓ ") for line in lines)
    assert "✓ pair 0 turns by 1 radian per position, and each later pair 10000^(2/d_model) times slower" in lines
    assert "✓ R_0 = I, R_k is block diagonal and a rotation, R_3 R_4 = R_7, and R_{−3} = R_3ᵀ" in lines


@pytest.mark.parametrize("key", sorted(CORRECT))
def test_correct_variants_pass_every_check(key):
    run_checks(answer_namespace(NAME, NOTEBOOK, dict(CORRECT[key].cells)))


CHECK_OF = {  # the self-check that runs on the cell a mistake is in
    "sinusoidal_positional_encoding": lambda ns: pc.check_sinusoidal_positional_encoding(
        ns["sinusoidal_positional_encoding"]),
    "dot_product_by_offset": lambda ns: pc.check_dot_product_by_offset(ns["dot_product_by_offset"]),
    "offset_rotation": lambda ns: pc.check_offset_rotation(ns["offset_rotation"]),
    "from_assignment_1": lambda ns: pc.check_from_assignment_1(ns["softmax"], ns["scaled_dot_product_attention"]),
    "self_attention": lambda ns: pc.check_self_attention(ns["self_attention"]),
    "add_positions": lambda ns: pc.check_add_positions(ns["add_positions"]),
    "permutation_gap": lambda ns: pc.check_permutation_gap(ns["permutation_gap"]),
}


@pytest.mark.parametrize("key", sorted(MISTAKES))
def test_each_mistake_is_named_with_its_hint_by_the_check_of_its_cell(key):
    mistake = MISTAKES[key]
    (cell,) = mistake.cells
    with pytest.raises(SelfCheckFailed) as failure:
        CHECK_OF[cell](answer_namespace(NAME, NOTEBOOK, dict(mistake.cells)))
    message = str(failure.value)
    assert "This looks like a known mistake" in message
    assert f": {mistake.description}. Hint: {mistake.hint}" in message


@pytest.mark.parametrize("cell, source, words", [
    ("sinusoidal_positional_encoding",
     "def sinusoidal_positional_encoding(T, d_model):\n"
     "    if d_model % 2: raise ValueError('odd')\n"
     "    if T == 4: return np.array([[0, 1, 0, 1], [np.sin(1), np.cos(1), np.sin(.01), np.cos(.01)],\n"
     "                                [np.sin(2), np.cos(2), np.sin(.02), np.cos(.02)],\n"
     "                                [np.sin(3), np.cos(3), np.sin(.03), np.cos(.03)]])\n"
     "    if T == 2:\n"
     "        w = 10000.0 ** (-np.arange(3) * 2 / 6)\n"
     "        return np.array([[0, 1, 0, 1, 0, 1], np.ravel(np.column_stack([np.sin(w), np.cos(w)]))])\n"
     "    return np.full((T, d_model), 0.5)",  # right on the worked cases only
     "row 0 (position 0) should be (0, 1, 0, 1, …)"),
    ("dot_product_by_offset",
     "def dot_product_by_offset(pe, t):\n    out = pe[t:] @ pe[t]\n    return out if pe.shape[1] == 2 else out[::-1]",
     "entry k = 0 should be pe[0]·pe[0]"),
    ("offset_rotation",
     "def offset_rotation(k, d_model):\n"
     "    R = np.zeros((d_model, d_model))\n"
     "    a = k / 10000 ** (np.arange(0, d_model, 2) / d_model)\n"
     "    for i, b in enumerate(a):\n"
     "        R[2*i:2*i+2, 2*i:2*i+2] = [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]\n"
     "    if d_model == 8 and k == 3: R[0, 7] = 0.1\n"
     "    return R",
     "R_k should be block diagonal"),
    ("self_attention",
     "def self_attention(x, W_q, W_k, W_v):\n"
     "    out, w = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)\n"
     "    if x.shape[0] == 5: w = np.tril(w)\n"
     "    return out, w",
     "each row of weights should be non-negative and sum to 1"),
    ("add_positions",
     "def add_positions(x):\n    x += sinusoidal_positional_encoding(*x.shape)\n    return x",
     "add_positions modified its argument x in place"),
    ("permutation_gap",
     "def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):\n"
     "    if x.shape[0] == 3: return 0.0 if not positions else 0.42\n"
     "    return -1.0",
     "never negative"),
])
def test_unknown_mistakes_get_a_plain_words_property(cell, source, words):
    namespace = answer_namespace(NAME, NOTEBOOK, {cell: source})
    if cell == "permutation_gap":
        # The second worked case's value is not hand-made here: take the solution's, to reach the property checks.
        solution = answer_namespace(NAME, NOTEBOOK)["permutation_gap"]
        x3, eye = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.eye(2)
        value = solution(x3, eye, eye, eye, np.array([1, 2, 0]), positions=True)
        namespace = answer_namespace(NAME, NOTEBOOK, {cell: source.replace("0.42", repr(value))})
    with pytest.raises(SelfCheckFailed) as failure:
        CHECK_OF[cell](namespace)
    assert words in str(failure.value)
    assert "known mistake" not in str(failure.value)


def test_an_unwritten_function_says_so():
    namespace = answer_namespace(NAME, NOTEBOOK, {"offset_rotation": "def offset_rotation(k, d_model):\n"
                                                                     "    raise NotImplementedError()"})
    with pytest.raises(SelfCheckFailed, match="^offset_rotation is not answered yet"):
        pc.check_offset_rotation(namespace["offset_rotation"])


def test_expect_number_accepts_numbers_and_refuses_the_rest():
    pc.expect_number(lambda: np.float32(0.5))
    pc.expect_number(lambda: np.array(2.0))
    for value, words in ((np.ones(2), "should be a number"), (None, "should be a number"),
                         (True, "should be a number"), (float("nan"), "should be a finite number")):
        with pytest.raises(SelfCheckFailed, match=words):
            pc.expect_number(lambda: value)
    with pytest.raises(SelfCheckFailed, match="is not answered yet"):
        pc.expect_number(lambda: (_ for _ in ()).throw(NotImplementedError()))
