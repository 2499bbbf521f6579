"""Assignment 9 (the tiny-GPT capstone) as data for the grader.

Built from the answer bank (:mod:`autograder.assignments.a09_tiny_gpt.bank`, see DESIGN.md): its hidden cases
(fixed seeds 9000–9001 and the committed weights), its correct rewrites and its known mistakes (edits of the source
notebook's solution). Step 0 grades the functions pasted from assignments 1, 2 and 5 once, so that the grader can
stand in for them wherever a later step calls them; every later step is graded with stand-ins for the earlier
functions it calls (the reference's values), so one mistake costs points once. Tolerances: the pasted functions as in
assignment 8; LayerNorm, the MLP and attention rtol 1e-5 (float32 LayerNorm and GELU pass, the erf GELU does not);
the block 1e-5 and the whole model 1e-4 (sums of float32-sized differences); tokens exactly. Two questions (1 point
each) and a written answer (0 points, graded by hand) follow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a09_tiny_gpt import bank
from autograder.assignments.a09_tiny_gpt import reference as ref
from autograder.grader.spec import Assignment, Case, Step

NAME = "09_tiny_gpt"


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _arrays(got, expected) -> bool:
    """Whether got has the expected structure: an array of the same shape, or a tuple/list of such."""
    if isinstance(expected, np.ndarray):
        return isinstance(got, np.ndarray) and got.shape == expected.shape
    return (isinstance(got, (tuple, list)) and len(got) == len(expected)
            and all(_arrays(g, e) for g, e in zip(got, expected)))


def _diagnose_layer_norm(case: Case, got, expected) -> list[str]:
    if not _arrays(got, expected):
        return []
    x, gain, bias = (np.asarray(a, dtype=float) for a in case.args[:3])
    plain = (got - bias) / np.where(gain == 0, 1.0, gain)
    if not np.allclose(plain.mean(axis=-1), 0.0, atol=1e-6):
        return ["After removing gain and bias, each row should have mean 0: LayerNorm centres every token over "
                "its own features (the last axis)."]
    return []


def _diagnose_attention(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return []
    cache = got[1]
    if isinstance(cache, (tuple, list)) and len(cache) == 2 and isinstance(cache[0], np.ndarray) \
            and cache[0].shape != expected[1][0].shape:
        return [f"The key cache should have shape (n_heads, T_past + T_new, d_head) = {expected[1][0].shape}; "
                f"it has shape {cache[0].shape}."]
    if _arrays(cache, expected[1]) and np.allclose(cache[0], expected[1][0], rtol=1e-5, atol=1e-6) \
            and np.allclose(cache[1], expected[1][1], rtol=1e-5, atol=1e-6):
        return ["The cache is right, so the attention over it is wrong: the causal mask aligned bottom-right, "
                "each head scaled by √d_head, the heads merged and multiplied by W_o."]
    return []


def _diagnose_forward(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[0], np.ndarray)):
        return []
    if got[0].shape != expected[0].shape:
        return [f"The logits should have shape (T_new, vocab_size) = {expected[0].shape}; they have shape "
                f"{got[0].shape}."]
    return []


def _diagnose_tokens(case: Case, got, expected) -> list[str]:
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray) or got.shape != expected.shape:
            return []
        prompt = len(case.args[2])
        if not np.array_equal(got[:prompt], expected[:prompt]):
            return ["The result should begin with the prompt, unchanged."]
        wrong = np.flatnonzero(got != expected)
        if wrong.size:
            return [f"The first wrong token is new token {int(wrong[0]) - prompt} (index {int(wrong[0])}); the ones "
                    "before it are right."]
        return []
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool) and len(case.args) > 1:
        logits = np.asarray(case.args[0], dtype=float)
        if int(got) == int(np.argmax(logits)) and int(got) != int(expected):
            return ["That is the greedy token: with a temperature, sample by the inverse CDF of "
                    "softmax(logits / temperature) with the given u."]
    return []


# ---- steps: the bank's hidden cases -----------------------------------------------------------------

def _cases(grade_id: str):
    def cases(seed: int | None = None) -> list[Case]:
        # fixed cases (fixed seeds, the committed weights): another seed gives the same inputs
        return bank.hidden_cases()[grade_id]
    return cases


_DIAGNOSES = {"test_layer_norm": _diagnose_layer_norm, "test_causal_attention": _diagnose_attention,
              "test_decoder_block": _diagnose_attention, "test_model_forward": _diagnose_forward,
              "test_next_token": _diagnose_tokens, "test_generate": _diagnose_tokens}
STEPS = tuple(Step(grade_id, "earlier" if grade_id == "test_from_earlier_assignments" else title.split(":")[0],
                   _cases(grade_id), _DIAGNOSES.get(grade_id))
              for grade_id, (title, _) in bank.STEPS.items())

CORRECT = bank.CORRECT
MISTAKES = bank.MISTAKES


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def tiny_model() -> tuple[dict[str, np.ndarray], dict]:
    """A 1-layer model small enough to print: vocab 5, block_size 6, d_model 4 (2 heads of 2), MLP 8 wide.

    Its numbers are random with one decimal (seed 9100), so that the worked cases show them in full.
    """
    rng = np.random.default_rng(9100)
    shapes = {"W_emb": (5, 4), "W_pos": (6, 4), "block0.ln1.gain": (4,), "block0.ln1.bias": (4,),
              "block0.W_q": (4, 4), "block0.W_k": (4, 4), "block0.W_v": (4, 4), "block0.W_o": (4, 4),
              "block0.ln2.gain": (4,), "block0.ln2.bias": (4,), "block0.W_1": (4, 8), "block0.b_1": (8,),
              "block0.W_2": (8, 4), "block0.b_2": (4,), "ln_f.gain": (4,), "ln_f.bias": (4,), "W_out": (4, 5)}
    params = {}
    for name, shape in shapes.items():
        values = np.round(rng.normal(0, 1.0, shape), 1)
        params[name] = values + 1.0 if name.endswith(".gain") else values
    config = {"vocab_size": 5, "block_size": 6, "n_heads": 2, "n_layers": 1, "ln_eps": 1e-5}
    return params, config


def _worked_cases():
    params, config = tiny_model()
    x = np.array([[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 0.0, 0.002]])
    h = np.array([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    W = np.array([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], [0.5, 0.0, 1.0, 0.0], [0.0, 0.5, 0.0, 1.0]])
    eye, I = np.eye(4), np.eye(4)
    _, past = ref.causal_attention(h[:2], W, eye, I, eye, 2)
    x3 = params["W_emb"][[0, 1, 2]] + params["W_pos"][:3]
    _, block_past = ref.decoder_block(x3[:2], params, 0, 2)
    _, caches = ref.model_forward(params, [0, 1], config)
    tol = dict(rtol=1e-5, atol=1e-6)
    exact = dict(rtol=0.0, atol=0.0)
    return (
        Case("2 rows [1, 2, 3, 6] and the nearly constant [0, 0, 0, 0.002] (variance below ε), gain 1, bias 0", "layer_norm",
             (x, np.ones(4), np.zeros(4)), outputs=("the normalised rows",), **tol),
        Case("the row [1, 2, 3, 6] with gain [2, 1, 1, 1] and bias [0, 0, 0, 1]", "layer_norm",
             (x[:1], np.array([2.0, 1.0, 1.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0])),
             outputs=("the normalised rows",), **tol),
        Case("x = [−3, −1, 0, 1, 2.7]", "gelu", (np.array([-3.0, -1.0, 0.0, 1.0, 2.7]),), outputs=("GELU(x)",),
             rtol=1e-6, atol=1e-6),
        Case("1 row [1, −1], W_1 = [[1, 0, 1], [0, 1, 1]], b_1 = 0, W_2 = ones (3, 1), b_2 = [0.5]", "mlp",
             (np.array([[1.0, -1.0]]), np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), np.zeros(3), np.ones((3, 1)),
              np.array([0.5])), outputs=("the MLP's output",), **tol),
        Case("3 tokens, 2 heads of 2, W_q given, W_k = W_v = W_o = I, no cache", "causal_attention",
             (h, W, eye, I, eye, 2), outputs=("the output", "the cache"), **tol),
        Case("the third token over the cache of the first two", "causal_attention", (h[2:], W, eye, I, eye, 2),
             {"cache": past}, outputs=("the output", "the cache"), **tol),
        Case("the tiny model's block on tokens [0, 1, 2] (embedded)", "decoder_block", (x3, params, 0, 2),
             outputs=("the output", "the cache"), **tol),
        Case("the tiny model's block, token 2 over the cache of tokens [0, 1]", "decoder_block",
             (x3[2:], params, 0, 2), {"cache": block_past}, outputs=("the output", "the cache"), **tol),
        Case("the tiny model on tokens [0, 1, 2]", "model_forward", (params, [0, 1, 2], config),
             outputs=("the logits", "the caches"), rtol=1e-4, atol=1e-4),
        Case("the tiny model, token 2 after the caches of [0, 1] (position 2)", "model_forward",
             (params, [2], config), {"caches": caches}, outputs=("the logits", "the caches"), rtol=1e-4, atol=1e-4),
        Case("greedy on logits [1, 3, 2, 3]: the first largest", "next_token", (np.array([1.0, 3.0, 2.0, 3.0]),),
             outputs=("the token",), **exact),
        Case("logits [0, ln 2, ln 3], temperature 1: p = [1/6, 2/6, 3/6], u = 0.4", "next_token",
             (np.log(np.array([1.0, 2.0, 3.0])), 1.0, 0.4), outputs=("the token",), **exact),
        Case("logits [0, ln 2, ln 3], temperature 0.5, u = 0.1", "next_token",
             (np.log(np.array([1.0, 2.0, 3.0])), 0.5, 0.1), outputs=("the token",), **exact),
        Case("ten equal logits, temperature 1, u = 0.9999999999999999 (the largest float below 1): the CDF ends at "
             "that value too (ten times 0.1, rounded), no entry is above u, so the last token", "next_token",
             (np.zeros(10), 1.0, float(np.nextafter(1.0, 0.0))), outputs=("the token",), **exact),
        Case("the tiny model, greedy, prompt [0, 1], 3 new tokens, with the cache", "generate",
             (params, config, [0, 1], 3), outputs=("the tokens",), **exact),
        Case("the tiny model, sampled at temperature 1, u = [0.05, 0.5, 0.95], without the cache", "generate",
             (params, config, [0, 1], 3), {"temperature": 1.0, "uniforms": np.array([0.05, 0.5, 0.95]),
                                          "use_cache": False}, outputs=("the tokens",), **exact),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="tiny_gpt.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(), reference=dict(bank.REFERENCE))
