"""Assignment 8's explorers, driven headlessly: RoPE's score pattern, the KV cache against n_kv_heads, ALiBi's bias.

The RoPE explorer's heatmap is Toeplitz, unchanged by a shift of every position and not symmetric; its curves
are the heatmap's diagonals, assignment 3's PE(t)·PE(t+k) and pair i's sinusoid; rotate_half is another
Toeplitz pattern, the one of an independent rotate_half RoPE. A wrong apply_rope shows a pattern that is not
Toeplitz (and says so), a relative mistake (positions counted from 1) does not. The memory explorer's bars are
the formula for every n_kv_heads dividing n_heads. ALiBi's explorer draws the reference's bias and its softmax. A
function that raises, hangs or returns the wrong thing is reported in one line, and a fixed cell is picked up.
"""

import math

import numpy as np
import pytest

from attention_lab.a08_modern_attention import alibi as alibi_visual
from attention_lab.a08_modern_attention import visual as vis
from attention_lab.core import explorer as explorer_module
from autograder.assignments.a03_positional import reference as a03
from autograder.assignments.a08_modern_attention import reference as ref
from notebook_harness import namespace_with

SETTINGS = vis.RopeSettings(T=24, d_head=16, base=10_000.0, shift=0, pair=2, rotate_half=False)


def rope_scores(positions_q, positions_k, q, k, base, rotate_half=False):
    """rope(q, m) · rope(k, n) for every m, n, written here from the formula (rotate_half: pairs (i, i + d/2))."""
    d = q.size
    theta = base ** (-np.arange(0, d, 2) / d)

    def turn(x, p):
        angle = p * theta
        if rotate_half:
            first, second = x[:d // 2], x[d // 2:]
            return np.concatenate([first * np.cos(angle) - second * np.sin(angle),
                                   first * np.sin(angle) + second * np.cos(angle)])
        out = np.empty(d)
        out[0::2] = x[0::2] * np.cos(angle) - x[1::2] * np.sin(angle)
        out[1::2] = x[0::2] * np.sin(angle) + x[1::2] * np.cos(angle)
        return out

    return np.array([[turn(q, m) @ turn(k, n) for n in positions_k] for m in positions_q])


def not_a_rotation(x, positions, base=10000.0):
    """The bank's `not_a_rotation` mistake: cos and sin swapped in each pair's second coordinate."""
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    angles = np.asarray(positions)[..., None] * base ** (-np.arange(0, d, 2) / d)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * np.cos(angles) - odd * np.sin(angles)
    out[..., 1::2] = even * np.cos(angles) + odd * np.sin(angles)
    return out


def positions_from_one(x, positions, base=10000.0):
    """The bank's `positions_from_one` mistake: every row turned one position too far."""
    return ref.apply_rope(x, np.asarray(positions) + 1, base)


@pytest.fixture(scope="module")
def rope():
    return vis.RopeExplorer(ref.apply_rope, T=24, d_head=16, pair=2, sync=True)


@pytest.fixture(scope="module")
def memory():
    return vis.CacheMemoryExplorer(ref.kv_cache_bytes, sync=True)


# ---- RoPE ---------------------------------------------------------------------------------------------------------

def test_the_heatmap_is_the_scores_of_q_and_k_at_every_position_and_is_toeplitz():
    view = vis.compute_rope_view(ref.apply_rope, SETTINGS)
    q, k = vis.query_and_key(16)
    np.testing.assert_allclose(view.scores, rope_scores(range(24), range(24), q, k, 10_000.0), atol=1e-12)
    T = SETTINGS.T
    for offset in range(-(T - 1), T):  # every diagonal is constant: the score sees only n − m
        diagonal = np.diagonal(view.scores, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    assert view.toeplitz_spread < 1e-12
    assert np.abs(view.scores - view.scores.T).max() > 0.05  # not symmetric: +3 and −3 differ
    assert "Every diagonal of the 24 × 24 scores is constant" in view.summary and "not symmetric" in view.summary


@pytest.mark.parametrize("shift", [37, 4096])
def test_shifting_every_position_changes_no_score(shift):
    plain = vis.compute_rope_view(ref.apply_rope, SETTINGS)
    shifted = vis.compute_rope_view(ref.apply_rope, vis.RopeSettings(24, 16, 10_000.0, shift, 2, False))
    np.testing.assert_allclose(shifted.scores, plain.scores, atol=1e-12)
    assert shifted.shift_change < 1e-12 and shifted.toeplitz_spread < 1e-12
    assert f"shifting every position by s = {shift} changes no score by more than" in shifted.summary


def test_the_offset_curves_are_the_diagonals_assignment_3s_dot_products_and_pair_i():
    view = vis.compute_rope_view(ref.apply_rope, SETTINGS)
    T = SETTINGS.T
    np.testing.assert_array_equal(view.offsets, np.arange(-T, T + 1))
    for offset in range(-(T - 1), T):  # score(n − m) is the heatmap's diagonal n − m
        np.testing.assert_allclose(view.by_offset[T + offset], np.diagonal(view.scores, offset)[0], atol=1e-12)
    assert view.asymmetry > 0.05
    # assignment 3's PE(t)·PE(t+k), from its reference, ÷ (d/2); the same for ±k
    pe = a03.sinusoidal_positional_encoding(3 * T, 16)
    np.testing.assert_allclose(vis.sinusoid_by_offset(np.arange(T + 1), 16, 10_000.0),
                               a03.dot_product_by_offset(pe, 5)[:T + 1] / 8, atol=1e-12)
    np.testing.assert_allclose(vis.sinusoid_by_offset(-np.arange(T + 1), 16, 10_000.0),
                               vis.sinusoid_by_offset(np.arange(T + 1), 16, 10_000.0), atol=1e-15)
    # pair i alone: (q·k of the pair) cos(nθ_i) + (q_odd k_even − q_even k_odd) sin(nθ_i), period 2π/θ_i
    q, k = vis.query_and_key(16)
    i, theta = SETTINGS.pair, 10_000.0 ** (-4 / 16)
    qe, qo, ke, ko = q[2 * i], q[2 * i + 1], k[2 * i], k[2 * i + 1]
    n = view.offsets
    np.testing.assert_allclose(view.pair_by_offset, (qe * ke + qo * ko) * np.cos(n * theta)
                               + (qo * ke - qe * ko) * np.sin(n * theta), atol=1e-12)
    assert f"one turn every {2 * math.pi / theta:,.3g} positions" in view.summary


def test_rotate_half_is_another_toeplitz_pattern_for_the_same_q_and_k():
    settings = vis.RopeSettings(24, 16, 10_000.0, 0, 2, True)
    view = vis.compute_rope_view(ref.apply_rope, settings)
    q, k = vis.query_and_key(16)
    np.testing.assert_allclose(view.scores, rope_scores(range(24), range(24), q, k, 10_000.0, rotate_half=True),
                               atol=1e-12)
    assert view.toeplitz_spread < 1e-12
    assert np.abs(view.scores - vis.compute_rope_view(ref.apply_rope, SETTINGS).scores).max() > 0.05
    assert "rotate_half pairing (i, i + d_head/2)" in view.summary


def test_a_wrong_apply_rope_shows_a_pattern_that_is_not_toeplitz_and_says_so():
    view = vis.compute_rope_view(not_a_rotation, vis.RopeSettings(24, 16, 10_000.0, 50, 2, False))
    assert view.toeplitz_spread > 0.1 and view.shift_change > 0.1
    assert "are NOT constant" in view.summary and "changes scores by up to" in view.summary


def test_positions_counted_from_one_keep_the_pattern_a_shift_is_invisible_to_scores():
    view = vis.compute_rope_view(positions_from_one, SETTINGS)
    np.testing.assert_allclose(view.scores, vis.compute_rope_view(ref.apply_rope, SETTINGS).scores, atol=1e-12)


def test_the_explorer_draws_the_view_and_its_controls_redraw_once(rope):
    assert rope.error is None and rope.figure.heatmap_ax.get_xlabel() == "key position n"
    assert rope.figure.heatmap_ax.get_ylabel() == "query position m"
    np.testing.assert_allclose(rope.figure.image.get_array(), rope.view.scores)
    rope_line, sinusoid_line = rope.figure.offset_ax.get_lines()[-2:]
    np.testing.assert_allclose(rope_line.get_ydata(), rope.view.by_offset)
    before = rope.redraws
    rope.shift_slider.value = 300
    assert rope.redraws == before + 1
    assert rope.figure.image.get_extent() == [299.5, 323.5, 323.5, 299.5]  # the axes show the shifted positions
    rope.pair_slider.value = 7
    rope.d_head_slider.value = 8  # 4 pairs: the pair follows into range, one redraw
    assert (rope.pair_slider.value, rope.pair_slider.max, rope.redraws) == (3, 3, before + 3)
    assert rope.view.pair_by_offset.shape == (49,) and "Pair 3 turns" in rope.summary.value
    rope.d_head_slider.value, rope.shift_slider.value = 16, 0
    for control in (rope.T_slider, rope.d_head_slider, rope.base_slider, rope.shift_slider, rope.pair_slider,
                    rope.rotate_half_box):
        assert control.description and control.tooltip


def test_a_learner_apply_rope_that_raises_is_named_in_one_line_and_a_fix_is_picked_up():
    namespace = namespace_with({"rope": "def apply_rope(x, positions, base=10000.0):\n"
                                        "    raise NotImplementedError('step 1')"})
    explorer = vis.RopeExplorer(namespace["apply_rope"], T=8, d_head=8, sync=True)
    assert explorer.view is None and explorer.error == "apply_rope raised NotImplementedError: step 1"
    assert "⚠ apply_rope raised NotImplementedError: step 1" in explorer.summary.value
    assert bytes(explorer.image.value).startswith(b"\x89PNG")
    # the heatmap and RoPE's curve are empty; assignment 3's curve, which needs no learner function, is drawn
    assert np.isnan(np.ma.getdata(explorer.figure.image.get_array())).all()
    (sinusoid,) = [line for line in explorer.figure.offset_ax.get_lines() if line.get_label().startswith("assign")]
    np.testing.assert_allclose(sinusoid.get_ydata(), vis.sinusoid_by_offset(np.arange(-8, 9), 8, 10_000.0))
    exec("def apply_rope(x, positions, base=10000.0):\n    return reference(x, positions, base)",
         {**namespace, "reference": ref.apply_rope}, namespace)
    namespace["apply_rope"].__globals__["reference"] = ref.apply_rope
    explorer.shift_slider.value = 5
    assert explorer.error is None and explorer.view.toeplitz_spread < 1e-12


@pytest.mark.parametrize("returned, message", [
    ("x[:, :2]", "returned shape (8, 2); expected the rotated rows, shape (8, 8)"),
    ("x * np.nan", "returned NaN or infinite values"),
    ("list(x)", "returned list; expected the rotated rows"),
    ("x.astype(complex)", "returned dtype complex128; expected real numbers"),
])
def test_a_wrong_return_value_is_explained(returned, message):
    namespace = namespace_with({"rope": f"def apply_rope(x, positions, base=10000.0):\n    return {returned}"})
    explorer = vis.RopeExplorer(namespace["apply_rope"], T=8, d_head=8, sync=True)
    assert explorer.view is None and message in explorer.error


def test_a_hanging_apply_rope_is_stopped(monkeypatch):
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.2)
    namespace = namespace_with({"rope": "def apply_rope(x, positions, base=10000.0):\n    while True:\n        pass"})
    explorer = vis.RopeExplorer(namespace["apply_rope"], T=8, d_head=8, sync=True)
    assert explorer.view is None and explorer.error.startswith("apply_rope raised FunctionTimedOut")


@pytest.mark.parametrize("setting, message", [
    ({"T": 1}, "T must be an integer from 2 to 96; received 1"),
    ({"d_head": 6}, "d_head must be one of (2, 4, 8, 16, 32, 64, 128); received 6"),
    ({"base": 5.0}, "base must be one of"),
    ({"shift": -1}, "shift must be an integer from 0 to 4096; received -1"),
    ({"d_head": 8, "pair": 4}, "pair must be an integer from 0 to d_head / 2 − 1 = 3; received 4"),
    ({"rotate_half": 1}, "rotate_half must be True or False; received 1"),
])
def test_bad_initial_rope_settings_are_refused_by_name(setting, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        vis.RopeExplorer(ref.apply_rope, sync=True, **setting)


def test_not_shown_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert vis.explore_rope(ref.apply_rope) is None and vis.explore_cache_memory(ref.kv_cache_bytes) is None
    assert alibi_visual.explore_alibi(ref.alibi_slopes) is None
    assert capsys.readouterr().out == ("(the RoPE explorer is not shown while grading)\n"
                                       "(the KV-cache memory explorer is not shown while grading)\n"
                                       "(the ALiBi explorer is not shown while grading)\n")


def test_the_explorers_are_built_on_the_one_explorer_base():
    for explorer_class in (vis.RopeExplorer, vis.CacheMemoryExplorer, alibi_visual.AlibiExplorer):
        assert issubclass(explorer_class, explorer_module.Explorer)
        assert "redraw" not in vars(explorer_class) and "_on_change" not in vars(explorer_class)


# ---- KV-cache memory ----------------------------------------------------------------------------------------------

def test_the_bars_are_the_formula_for_every_n_kv_heads_dividing_n_heads(memory):
    view, s = memory.view, memory.settings
    assert (s.T, s.n_layers, s.n_heads, s.d_head, s.bytes_per_value) == (4096, 80, 64, 128, 2)  # Llama 2 70B
    np.testing.assert_array_equal(view.n_kv_heads, [1, 2, 4, 8, 16, 32, 64])
    assert view.kinds == ("MQA", "GQA", "GQA", "GQA", "GQA", "GQA", "MHA")
    np.testing.assert_array_equal(view.per_token, 2 * 80 * view.n_kv_heads * 128 * 2)
    np.testing.assert_array_equal(view.at_T, 4096 * 2 * 80 * view.n_kv_heads * 128 * 2)
    assert view.per_token[3] == 327_680  # GQA with 8 kv heads: 320 KiB per token, 8 times less than MHA
    summary = memory.summary.value
    assert "MHA with 64 kv heads: 2.5 MiB per token, 10 GiB at 4,096 tokens" in summary
    assert "GQA with 8 kv heads: 320 KiB per token, 1.25 GiB at 4,096 tokens" in summary
    assert "MQA with 1 kv head: 40 KiB per token, 160 MiB at 4,096 tokens" in summary
    assert view.weights_bytes == 68.98e9 * 2 and "The weights take 128 GiB" in summary
    bars = [patch.get_height() for patch in memory.figure.per_token_ax.patches]
    np.testing.assert_allclose(bars, view.per_token / 2 ** 20)  # drawn in MiB
    assert memory.figure.per_token_ax.get_ylabel() == "MiB"


def test_a_preset_sets_every_size_in_one_redraw_and_other_sizes_have_no_weights_line(memory):
    before = memory.redraws
    memory.preset_dropdown.value = "Mistral 7B"
    assert memory.redraws == before + 1
    s = memory.settings
    assert (s.T, s.n_layers, s.n_heads, s.d_head, s.bytes_per_value) == (8192, 32, 32, 128, 2)
    np.testing.assert_array_equal(memory.view.at_T, 8192 * 2 * 32 * memory.view.n_kv_heads * 128 * 2)
    assert "GQA with 8 kv heads: 128 KiB per token, 1 GiB at 8,192 tokens" in memory.summary.value
    memory.heads_slider.value = 7
    assert memory.view.kinds == ("MQA", "MHA") and memory.view.preset is None and memory.view.weights_bytes is None
    assert "weights" not in memory.summary.value and len(memory.figure.at_T_ax.get_lines()) == 0
    memory.heads_slider.value = 1
    assert memory.view.kinds == ("MHA",) and memory.view.per_token.tolist() == [2 * 32 * 128 * 2]
    memory.preset_dropdown.value = "Llama 2 70B"


def test_the_weights_line_is_drawn_on_log_axes_and_named_off_a_linear_one(memory):
    figure = memory.figure
    assert len(figure.at_T_ax.get_lines()) == 0  # 128 GiB against 10 GiB: off the linear axis, said in words
    assert any("weights: 128 GiB, 12.8× the top bar" in text.get_text() for text in figure.at_T_ax.texts)
    memory.log_box.value = True
    try:
        (line,) = figure.at_T_ax.get_lines()
        assert line.get_ydata()[0] == pytest.approx(68.98e9 * 2 / 2 ** 30)
        assert figure.at_T_ax.get_yscale() == "log" and line.get_label() == "weights of Llama 2 70B"
    finally:
        memory.log_box.value = False


def test_a_learner_kv_cache_bytes_that_raises_or_returns_no_number_is_named():
    namespace = namespace_with({"bytes": "def kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value):\n"
                                         "    raise NotImplementedError()"})
    explorer = vis.CacheMemoryExplorer(namespace["kv_cache_bytes"], sync=True)
    assert explorer.view is None and explorer.error == "kv_cache_bytes raised NotImplementedError"
    assert len(explorer.figure.per_token_ax.patches) == 0 and bytes(explorer.image.value).startswith(b"\x89PNG")
    for returned, message in (("'many'", "kv_cache_bytes(1, 80, 1, 128, 2) returned str 'many'; expected a number"),
                              ("-T", "kv_cache_bytes(1, 80, 1, 128, 2) returned -1; a number of bytes is finite"),
                              ("True", "returned bool True")):
        namespace = namespace_with({"bytes": "def kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value):\n"
                                             f"    return {returned}"})
        explorer = vis.CacheMemoryExplorer(namespace["kv_cache_bytes"], sync=True)
        assert explorer.view is None and message in explorer.error


def test_a_learner_formula_missing_the_2_draws_its_own_numbers():
    """The explorer draws what the learner's function returns (the self-check says whether it is right)."""
    view = vis.compute_memory_view(lambda T, L, g, d, b: T * L * g * d * b, vis.MemorySettings(16, 2, 4, 8, 4))
    np.testing.assert_array_equal(view.per_token, [2 * 8 * 4, 2 * 2 * 8 * 4, 4 * 2 * 8 * 4])


@pytest.mark.parametrize("setting, message", [
    ({"preset": "GPT-4"}, "preset must be one of"),
    ({"T": 1000}, "T must be one of"),
    ({"n_heads": 0}, "n_heads must be an integer from 1 to 128; received 0"),
    ({"bytes_per_value": 3}, "bytes_per_value must be 1, 2 or 4; received 3"),
])
def test_bad_initial_memory_settings_are_refused_by_name(setting, message):
    with pytest.raises(ValueError, match=message):
        vis.CacheMemoryExplorer(ref.kv_cache_bytes, sync=True, **setting)


@pytest.mark.parametrize("n, text", [(327_680, "320 KiB"), (10 * 2 ** 30, "10 GiB"), (1.25 * 2 ** 30, "1.25 GiB"),
                                     (512, "512 B"), (2.5 * 2 ** 20, "2.5 MiB")])
def test_bytes_are_said_in_binary_units(n, text):
    assert vis.readable_bytes(n) == text


# ---- ALiBi --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def alibi():
    return alibi_visual.AlibiExplorer(ref.alibi_slopes, n_heads=8, T=32, sync=True)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_the_bias_is_alibis_and_the_weights_are_its_softmax(alibi):
    view = alibi.view
    np.testing.assert_array_equal(view.slopes, 2.0 ** -np.arange(1, 9))  # 1/2 … 1/256
    np.testing.assert_array_equal(view.bias, ref.alibi_bias(8, 32, 32))  # −m_h (i − j), −inf for j > i
    np.testing.assert_allclose(view.weights, softmax(ref.alibi_bias(8, 32, 32)[:, 31, :]), atol=1e-15)
    # the steepest head's weights fall as e^(−d/2) with the distance d: 0.39 on the last key, 0.63 on the last two;
    # the gentlest is almost uniform over the 32 keys, so half its weight takes the last 16
    assert (view.spans[0], view.spans[-1]) == (2, 16) and list(view.spans) == sorted(view.spans)
    assert "half its weight on the last 2 keys under the steepest head (0, slope 0.5)" in alibi.summary.value
    assert "on the last 16 keys under the gentlest (7, slope 0.003906)" in alibi.summary.value
    drawn = alibi.figure.head_axes[0].get_images()[0].get_array()
    assert np.ma.getdata(drawn)[0, 1] != np.ma.getdata(drawn)[0, 1]  # −inf drawn as the "bad" colour, black
    assert alibi.figure.head_axes[0].get_ylabel() == "query position"
    assert alibi.figure.head_axes[-1].get_xlabel() == "key position"


def test_the_row_follows_t_and_the_grid_follows_n_heads(alibi):
    alibi.heads_slider.value = 6
    assert len(alibi.figure.head_axes) == 6
    np.testing.assert_array_equal(alibi.view.slopes, ref.alibi_slopes(6))  # 1/4 … 1/256, then 1/2 and 1/8
    before = alibi.redraws
    alibi.T_slider.value = 12  # the row was the last one: it stays the last one, in one redraw
    assert (alibi.row_slider.value, alibi.row_slider.max, alibi.redraws) == (11, 11, before + 1)
    alibi.row_slider.value = 3
    alibi.T_slider.value = 20
    assert alibi.row_slider.value == 3 and alibi.view.weights[:, 4:].max() == 0  # future keys get nothing
    alibi.heads_slider.value, alibi.T_slider.value = 8, 32
    alibi.row_slider.value = 31


def test_slopes_of_the_wrong_shape_or_sign_are_named():
    for returned, message in (("np.ones(n_heads + 1)", "returned shape (9,); expected one slope per head, shape (8,)"),
                              ("-2.0 ** -np.arange(1, n_heads + 1)", "every slope is a finite number > 0"),
                              ("[0.5] * n_heads", "returned list")):
        namespace = namespace_with({"slopes": f"def alibi_slopes(n_heads):\n    return {returned}"})
        explorer = alibi_visual.AlibiExplorer(namespace["alibi_slopes"], sync=True)
        assert explorer.view is None and message in explorer.error
    namespace = namespace_with({"slopes": "def alibi_slopes(n_heads):\n    raise NotImplementedError()"})
    explorer = alibi_visual.AlibiExplorer(namespace["alibi_slopes"], sync=True)
    assert explorer.error == "alibi_slopes raised NotImplementedError" and "⚠" in explorer.summary.value


def test_bad_initial_alibi_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="n_heads must be an integer from 1 to 16; received 0"):
        alibi_visual.AlibiExplorer(ref.alibi_slopes, n_heads=0, sync=True)
    with pytest.raises(ValueError, match="row must be an integer from 0 to T − 1 = 7; received 8"):
        alibi_visual.AlibiExplorer(ref.alibi_slopes, T=8, row=8, sync=True)
