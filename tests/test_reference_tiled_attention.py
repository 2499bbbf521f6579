"""The assignment-7 reference: online softmax and tiled attention equal their one-shot versions, and save memory."""

import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from traitlets.config.loader import PyFileConfigLoader

from conftest import REPO
from autograder.assignments.a01_attention.reference import scaled_dot_product_attention, softmax
from autograder.assignments.a05_kv_cache.reference import causal_mask
from autograder.assignments.a04_masking.reference import masked_softmax

from autograder.assignments.a07_tiled_attention import reference as ref
from attention_lab.a07_tiled_attention.memory import memory_growth

SAME = dict(rtol=0.0, atol=1e-12)


def splits(x, size):
    """The blocks of x along its last axis, ``size`` entries each (the last one shorter)."""
    return [x[..., start:start + size] for start in range(0, x.shape[-1], size)]


def full_attention(Q, K, V, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    return scaled_dot_product_attention(Q, K, V, mask=causal_mask(T_q, T_k) if causal else None)[0]


# ---- online softmax ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(11,), (3, 11), (2, 3, 11)])
def test_online_softmax_equals_softmax_for_every_block_size(shape):
    x = np.random.default_rng(0).normal(0, 4.0, shape)
    expected = softmax(x)
    for size in range(1, shape[-1] + 2):  # 1 … n (ragged whenever size does not divide 11), and one block > n
        np.testing.assert_allclose(ref.online_softmax(splits(x, size)), expected, **SAME)


def test_uneven_splits_and_a_tuple():
    x = np.random.default_rng(1).normal(0, 3.0, (4, 10))
    blocks = (x[:, :1], x[:, 1:7], x[:, 7:9], x[:, 9:])
    np.testing.assert_allclose(ref.online_softmax(blocks), softmax(x), **SAME)


def test_large_logits_in_an_early_block_and_small_ones_later():
    """A running maximum that rises then stays: e^(x − m) must be measured from the row's true maximum."""
    x = np.concatenate([np.full(3, -2000.0), np.array([-800.0, -801.0]), np.full(4, -1600.0)])
    x = x + np.random.default_rng(2).normal(0, 1.0, x.shape)
    for size in range(1, x.size + 1):
        got = ref.online_softmax(splits(x, size))
        np.testing.assert_allclose(got, softmax(x), **SAME)
        assert np.isfinite(got).all()
    np.testing.assert_allclose(ref.online_softmax([np.array([1000.0, 1001.0]), np.array([1002.0])]),
                               [0.09003057, 0.24472847, 0.66524096], rtol=1e-7)  # notes M6


def test_minus_inf_entries_and_fully_masked_rows_like_assignment_4():
    x = np.random.default_rng(3).normal(0, 2.0, (4, 9))
    x[0, :4] = -np.inf  # a leading block that is all -inf for small block sizes
    x[1, :] = -np.inf  # a fully masked row: zeros, not NaN
    x[2, 5:] = -np.inf  # trailing blocks all -inf
    x[3, ::2] = -np.inf
    expected = masked_softmax(x, np.ones(x.shape, dtype=bool))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value" warning from -inf - (-inf)
        for size in range(1, 10):
            got = ref.online_softmax(splits(x, size))
            np.testing.assert_allclose(got, expected, **SAME)
            np.testing.assert_array_equal(got[1], np.zeros(9))
            np.testing.assert_array_equal(got[x == -np.inf], 0.0)
    np.testing.assert_array_equal(ref.online_softmax([np.full(3, -np.inf)]), np.zeros(3))


def test_running_max_and_sum():
    x = np.random.default_rng(4).normal(0, 5.0, (3, 8))
    x[1] = -np.inf
    for size in (1, 3, 8):
        m, l = ref.running_max_and_sum(splits(x, size))
        np.testing.assert_array_equal(m, x.max(axis=-1))
        np.testing.assert_allclose(l[[0, 2]], np.exp(x[[0, 2]] - m[[0, 2], None]).sum(axis=-1), rtol=1e-14)
        assert l[1] == 0.0 and m[1] == -np.inf
        assert m.shape == l.shape == (3,)


def test_online_softmax_dtypes_and_inputs_left_alone():
    x32 = np.random.default_rng(5).normal(0, 3.0, (2, 6)).astype(np.float32)
    got = ref.online_softmax(splits(x32, 4))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, softmax(x32.astype(np.float64)), rtol=1e-6, atol=1e-7)
    x16 = np.array([[10.0, 11.0, -np.inf, 9.0]], dtype=np.float16)  # e^11 overflows float16: computed in float32
    got16 = ref.online_softmax(splits(x16, 2))
    assert got16.dtype == np.float16 and np.isfinite(got16).all()
    np.testing.assert_allclose(got16, masked_softmax(x16, np.ones(x16.shape, dtype=bool)), rtol=1e-3)
    ints = ref.online_softmax([np.array([0, 1]), np.array([2])])
    assert ints.dtype == np.float64
    copy = x32.copy()
    ref.online_softmax(splits(x32, 2))
    np.testing.assert_array_equal(x32, copy)


@pytest.mark.parametrize("blocks, message", [
    (np.zeros((2, 3)), "list or tuple of arrays"),
    ("abc", "list or tuple of arrays"),
    ([], "at least one array"),
    ([np.zeros(3), np.zeros((2, 3))], r"leading shape of blocks\[0\], \(\)"),
    ([np.zeros((2, 3)), np.zeros((3, 3))], r"blocks\[1\]\.shape = \(3, 3\)"),
    ([np.zeros(2), np.zeros(0)], r"blocks\[1\] must have at least one entry"),
    ([np.array(1.0)], r"blocks\[0\] must have shape \(\.\.\., n_b\)"),
    ([np.array([1.0, np.nan])], "NaN or \\+inf"),
    ([np.array([1.0, np.inf])], "NaN or \\+inf"),
    ([np.array(["a", "b"])], "real numeric array"),
])
def test_online_softmax_errors_name_the_argument(blocks, message):
    with pytest.raises(ValueError, match=message):
        ref.online_softmax(blocks)


# ---- tile schedule ----------------------------------------------------------------------------------

def test_tile_schedule_hand_worked():
    # T = 10, 3 × 3 tiles: blocks [0-2] [3-5] [6-8] [9]; the diagonal tiles are masked, the last 1 × 1 is full
    np.testing.assert_array_equal(ref.tile_schedule(10, 10, 3, 3, True),
                                  [[1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0], [2, 2, 2, 2]])
    # 4 new queries over 10 keys (bottom-right): query 0 sits at position 6
    np.testing.assert_array_equal(ref.tile_schedule(4, 10, 3, 3, True), [[2, 2, 1, 0], [2, 2, 2, 2]])
    np.testing.assert_array_equal(ref.tile_schedule(5, 3, 2, 2, False), np.full((3, 2), ref.FULL))
    assert ref.tile_schedule(4, 4, 1, 1, True).dtype == np.int64
    np.testing.assert_array_equal(ref.tile_schedule(6, 6, 10, 10, True), [[ref.MASKED]])


@pytest.mark.parametrize("T_q, T_k", [(9, 9), (4, 9), (1, 9), (9, 13)])
def test_tile_schedule_agrees_with_the_mask_for_every_block_size(T_q, T_k):
    mask = causal_mask(T_q, T_k)
    for block_q in range(1, T_q + 2):
        for block_k in range(1, T_k + 2):
            schedule = ref.tile_schedule(T_q, T_k, block_q, block_k, True)
            assert schedule.shape == (math.ceil(T_q / block_q), math.ceil(T_k / block_k))
            for a in range(schedule.shape[0]):
                for b in range(schedule.shape[1]):
                    tile = mask[a * block_q:(a + 1) * block_q, b * block_k:(b + 1) * block_k]
                    want = ref.FULL if tile.all() else ref.SKIPPED if not tile.any() else ref.MASKED
                    assert schedule[a, b] == want, (block_q, block_k, a, b)


@pytest.mark.parametrize("args, message", [
    ((6, 4, 2, 2, True), "T_q must be <= T_k"),
    ((0, 4, 2, 2, True), "T_q must be an integer >= 1"),
    ((4, 4, 0, 2, True), "block_q must be an integer >= 1"),
    ((4, 4, 2, 2.0, True), "block_k must be an integer >= 1"),
    ((4, 4, 2, 2, 1), "causal must be True or False"),
])
def test_tile_schedule_errors(args, message):
    with pytest.raises(ValueError, match=message):
        ref.tile_schedule(*args)


# ---- tiled attention --------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T_q, T_k", [(9, 9), (5, 12), (1, 7)])
def test_tiled_attention_equals_full_attention_for_every_block_size(T_q, T_k, causal):
    rng = np.random.default_rng(10 + T_q + T_k)
    Q, K, V = rng.normal(0, 1.5, (T_q, 4)), rng.normal(0, 1.5, (T_k, 4)), rng.normal(size=(T_k, 3))
    expected = full_attention(Q, K, V, causal)
    skipped_somewhere = False
    for block_q in range(1, T_q + 2):
        for block_k in range(1, T_k + 2):
            np.testing.assert_allclose(ref.tiled_attention(Q, K, V, block_q, block_k, causal), expected, **SAME)
            skipped_somewhere |= (ref.tile_schedule(T_q, T_k, block_q, block_k, causal) == ref.SKIPPED).any()
    assert skipped_somewhere == (causal and T_q > 1)  # fully skipped causal tiles were exercised


def test_more_queries_than_keys_without_the_mask():
    rng = np.random.default_rng(20)
    Q, K, V = rng.normal(size=(8, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 2))
    for block_q, block_k in [(1, 1), (3, 2), (8, 3), (5, 7)]:
        np.testing.assert_allclose(ref.tiled_attention(Q, K, V, block_q, block_k, False),
                                   full_attention(Q, K, V, False), **SAME)


def test_batch_axes_broadcast():
    rng = np.random.default_rng(21)
    Q, K, V = rng.normal(size=(2, 3, 7, 4)), rng.normal(size=(3, 10, 4)), rng.normal(size=(1, 1, 10, 5))
    for causal in (False, True):
        got = ref.tiled_attention(Q, K, V, 3, 4, causal)
        assert got.shape == (2, 3, 7, 5)
        np.testing.assert_allclose(got, full_attention(Q, K, V, causal), **SAME)


def test_large_scores_and_float32():
    rng = np.random.default_rng(22)
    Q, K, V = rng.normal(0, 30.0, (6, 4)), rng.normal(0, 30.0, (6, 4)), rng.normal(size=(6, 2))  # scores ~ ±900
    np.testing.assert_allclose(ref.tiled_attention(Q, K, V, 2, 4, True), full_attention(Q, K, V, True), **SAME)
    got = ref.tiled_attention(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32), 4, 2, False)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, full_attention(Q, K, V, False), rtol=1e-4, atol=1e-5)


def test_causal_future_keys_do_not_matter():
    rng = np.random.default_rng(23)
    Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    before = ref.tiled_attention(Q, K, V, 2, 3, True)
    K2, V2 = K.copy(), V.copy()
    K2[4:], V2[4:] = 50.0, -50.0
    after = ref.tiled_attention(Q, K2, V2, 2, 3, True)
    np.testing.assert_array_equal(after[:4], before[:4])


@pytest.mark.parametrize("args, message", [
    ((np.zeros((3, 4)), np.zeros((5, 3)), np.zeros((5, 2)), 2, 2, False), r"Q.shape\[-1\] and K.shape\[-1\]"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((6, 2)), 2, 2, False), r"K.shape\[-2\] and V.shape\[-2\]"),
    ((np.zeros(4), np.zeros((5, 4)), np.zeros((5, 2)), 2, 2, False), r"Q must have shape \(\.\.\., T_q, d_k\)"),
    ((np.zeros((2, 3, 4)), np.zeros((3, 5, 4)), np.zeros((5, 2)), 2, 2, False), "must broadcast"),
    ((np.zeros((6, 4)), np.zeros((5, 4)), np.zeros((5, 2)), 2, 2, True), "T_q must be <= T_k"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), 0, 2, False), "block_q must be an integer >= 1"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), 2, None, False), "block_k must be an integer >= 1"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), 2, 2, "yes"), "causal must be True or False"),
    ((np.zeros((3, 4)), np.full((5, 4), np.nan), np.zeros((5, 2)), 2, 2, False), "K must be finite"),
    ((np.zeros((0, 4)), np.zeros((5, 4)), np.zeros((5, 2)), 2, 2, False), "Q must have T_q >= 1"),
])
def test_tiled_attention_errors_name_the_argument(args, message):
    with pytest.raises(ValueError, match=message):
        ref.tiled_attention(*args)


# ---- memory -----------------------------------------------------------------------------------------

def test_peak_memory_full_quadratic_tiled_linear():
    """Measured: full attention holds ≥ one T × T float64 matrix; tiled holds tiles plus the (T, d) output."""
    d, block = 8, 64
    table = memory_growth(ref.tiled_attention, [256, 512, 1024, 2048], d_head=d, block=block, causal=True)
    T, full, tiled = table["T"], table["full"], table["tiled"]
    np.testing.assert_array_equal(table["score_matrix"], T * T * 8)
    assert np.all(full >= T * T * 8)  # quadratic: at least the score matrix
    bound = 8 * block * block * 8 + 4 * T * d * 8 + 64 * 2**10  # a few tiles, a few (T, d) arrays, overhead
    assert np.all(tiled <= bound), (tiled, bound)
    growth = np.diff(tiled) / np.diff(T)  # bytes per extra position: linear in T, no T² term
    assert np.all(growth <= 4 * d * 8), growth
    ratio = full / tiled
    assert np.all(np.diff(ratio) > 0) and ratio[-1] > 100, ratio


def test_traced_peak_counts_the_temporaries():
    result, peak = ref.traced_peak_bytes(np.ones, (1000, 1000))
    assert result.shape == (1000, 1000) and peak >= 8 * 10**6
    _, small = ref.traced_peak_bytes(lambda: None)
    assert small < 10**4


def test_memory_case_numbers():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    assert config.SandboxedKernelManager.memory_limit == ref.SANDBOX_MEMORY_LIMIT == 2 * 2**30
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT) == 16385  # 2^31 / 8 = 2^28 = 16384²
    assert ref.score_matrix_bytes(16384, 16384) == ref.SANDBOX_MEMORY_LIMIT
    case = ref.MEMORY_CASE
    assert ref.score_matrix_bytes(case["T"], case["T"]) == 3_200_000_000 > ref.SANDBOX_MEMORY_LIMIT
    assert ref.score_matrix_bytes(case["T"], case["T"], 4) > ref.SANDBOX_MEMORY_LIMIT * 0.7  # float32 too, nearly
    assert case["T"] % case["block_q"] and case["T"] % case["block_k"]  # ragged last blocks
    for name in ("T_q", "T_k", "itemsize"):
        with pytest.raises(ValueError, match=name):
            ref.score_matrix_bytes(*[0 if n == name else 4 for n in ("T_q", "T_k", "itemsize")])


_SANDBOXED = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))  # as prlimit --as in the grading sandbox
sys.path.insert(0, {tests!r})
import numpy as np
from autograder.assignments.a01_attention.reference import scaled_dot_product_attention, softmax
from autograder.assignments.a07_tiled_attention import reference as ref
case = ref.MEMORY_CASE
T, d = case["T"], case["d_head"]
rng = np.random.default_rng(7)
Q, K, V = (rng.normal(size=(T, d)) for _ in range(3))
report = {{}}
for name, form in (("scores", lambda: Q @ K.T), ("full_attention", lambda: scaled_dot_product_attention(Q, K, V))):
    try:
        form()
        report[name] = "returned"
    except MemoryError:
        report[name] = "MemoryError"
start = time.perf_counter()
out = ref.tiled_attention(Q, K, V, case["block_q"], case["block_k"], case["causal"])
report["tiled_seconds"] = time.perf_counter() - start
rows = [0, 1, case["block_k"], T // 2, T - 1]  # exact causal attention of single rows: 1 × T scores each
exact = [softmax(Q[i] @ K[:i + 1].T / np.sqrt(d)) @ V[:i + 1] for i in rows]
report["max_error"] = float(max(np.abs(out[i] - e).max() for i, e in zip(rows, exact)))
report["shape"] = list(out.shape)
report["peak_virtual"] = [line for line in open("/proc/self/status") if line.startswith("VmPeak")][0].split()[1:]
print(json.dumps(report))
"""


def test_memory_case_forming_the_matrix_fails_in_the_sandbox_limit_and_tiled_passes():
    code = _SANDBOXED.format(limit=ref.SANDBOX_MEMORY_LIMIT, tests=str(REPO / "tests"))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report)
    assert report["scores"] == "MemoryError"
    assert report["full_attention"] == "MemoryError"
    assert report["shape"] == [ref.MEMORY_CASE["T"], ref.MEMORY_CASE["d_head"]]
    assert report["max_error"] <= 1e-12
