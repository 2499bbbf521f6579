"""The multi-head explorer, driven headlessly: each control redraws exactly what the reference computes."""

import io
import math

import numpy as np
import pytest
from matplotlib.colors import LogNorm, Normalize
from PIL import Image

from attention_lab.core import explorer as explorer_module
from attention_lab.core import plots
from attention_lab.a02_multi_head import visual as mh
from autograder.assignments.a01_attention import reference as ref
from autograder.assignments.a02_multi_head.reference import multi_head_attention

FUNCTIONS = (multi_head_attention, ref.attention_entropy)


@pytest.fixture
def explorer():
    return mh.MultiHeadExplorer(*FUNCTIONS, T=12, n_heads=4, head=1, sync=True)


@pytest.fixture(scope="module")
def untouched_explorer():
    """A new explorer as ``explorer`` builds it, shared by the tests that only read it (no control moves)."""
    return mh.MultiHeadExplorer(*FUNCTIONS, T=12, n_heads=4, head=1, sync=True)


def expected(T, n_heads, causal, seed):
    x, W_q, W_k, W_v, W_o = mh.draw_inputs(seed)
    _, weights = multi_head_attention(x[:T], W_q, W_k, W_v, W_o, n_heads, mask=ref.causal_mask(T) if causal else None)
    return weights, ref.attention_entropy(weights).mean(axis=-1)


def learner(source: str, name: str):
    """A function defined in a notebook-like namespace, as a learner's cell defines it."""
    namespace = {"np": np}
    exec(source, namespace)
    return namespace[name]


def pixels(explorer):
    return np.asarray(Image.open(io.BytesIO(explorer.image.value)).convert("RGB")).astype(int)


def rect_pixels(explorer, rect):
    """The rendered pixels inside an axes rectangle given in figure fractions."""
    img = pixels(explorer)
    height, width = img.shape[:2]
    left, bottom, w, h = rect
    return img[int((1 - bottom - h) * height) + 1:int((1 - bottom) * height) - 1,
               int(left * width) + 1:int((left + w) * width) - 1]


def colour(hex_colour):
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])


def count_colour(region, rgb, tolerance=3):
    return int(np.count_nonzero(np.abs(region - rgb).max(axis=-1) <= tolerance))


def check_matches_reference(explorer):
    s = explorer.settings
    weights, entropy = expected(s.T, s.n_heads, s.causal, s.seed)
    np.testing.assert_allclose(explorer.view.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(explorer.view.entropy, entropy, rtol=1e-12)
    figure = explorer.figure
    drawn = figure.colour_scale.values(weights)
    np.testing.assert_allclose(figure.head_image.get_array(), drawn[s.head], rtol=1e-12)
    drawn_mosaic = np.ma.filled(figure.mosaic_image.get_array().astype(float), np.nan)
    np.testing.assert_allclose(drawn_mosaic, mh.mosaic(drawn), rtol=1e-12)
    assert [bar.get_height() for bar in figure.bars] == pytest.approx(entropy.tolist(), rel=1e-12)
    assert [bar.get_x() + bar.get_width() / 2 for bar in figure.bars] == pytest.approx(list(range(s.n_heads)))
    highlighted = [i for i, bar in enumerate(figure.bars) if bar.get_facecolor()[:3] == pytest.approx(
        colour(mh.HIGHLIGHT) / 255, abs=1e-3)]
    assert highlighted == [s.head]
    top = np.mean(np.log(np.arange(1, s.T + 1))) if s.causal else math.log(s.T)
    assert figure.ceiling_line.get_ydata() == pytest.approx([top, top])
    assert f"{s.n_heads} head{'s' if s.n_heads > 1 else ''} of d_head = {64 // s.n_heads}" in explorer.summary.value
    assert f"head {s.head} has mean row entropy {entropy[s.head]:.2f} nats (uniform ceiling {top:.2f})" \
        in explorer.summary.value
    largest = (f"largest weight outside row 0 (always 1 under the causal mask) {weights[s.head][1:].max():.3f}"
               if s.causal else f"largest weight {weights[s.head].max():.3f}")
    assert largest in explorer.summary.value


@pytest.mark.parametrize("control, value", [("T_slider", 40), ("T_slider", 2), ("heads_slider", 16),
                                            ("heads_slider", 1), ("head_slider", 3), ("causal_box", False),
                                            ("seed_slider", 7)])
def test_each_control_redraws_what_the_reference_computes(explorer, control, value):
    before = explorer.image.value
    getattr(explorer, control).value = value
    check_matches_reference(explorer)
    assert explorer.image.value != before


def test_n_heads_changes_d_head_tiles_and_the_head_selector(explorer):
    explorer.head_slider.value = 3
    explorer.heads_slider.value = 16
    assert explorer.head_slider.max == 15 and explorer.head_slider.value == 3
    assert explorer.view.weights.shape == (16, 12, 12) and len(explorer.figure.bars) == 16
    assert "16 heads of d_head = 4 (d_model = 64)" in explorer.summary.value
    assert explorer.figure.mosaic_image.get_array().shape == (4 * 12 + 3, 4 * 12 + 3)  # 4 × 4 tiles, 1-cell gaps
    explorer.heads_slider.value = 2
    assert explorer.head_slider.max == 1 and explorer.head_slider.value == 1  # clamped into range
    check_matches_reference(explorer)
    assert explorer.figure.mosaic_image.get_array().shape == (12, 2 * 12 + 1)
    assert "2 heads of d_head = 32" in explorer.summary.value


def test_changing_n_heads_redraws_once(explorer):
    start = explorer.redraws
    explorer.head_slider.value = 3
    explorer.heads_slider.value = 2  # also moves the head selector to 1
    assert explorer.redraws == start + 2


def test_scaling_by_sqrt_d_head_keeps_every_head_equally_sharp():
    # The point the explorer makes: with ÷√d_head the mean entropy hardly depends on n_heads; ÷√d_model
    # (mistakes.md M4) makes many small heads much flatter.
    scaled_by_d_model = learner(
        "def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
        "    T, d = x.shape\n"
        "    Q, K, V = ((x @ W).reshape(T, n_heads, -1).transpose(1, 0, 2) for W in (W_q, W_k, W_v))\n"
        "    s = Q @ K.transpose(0, 2, 1) / np.sqrt(d)\n"
        "    s = s if mask is None else np.where(mask, s, -np.inf)\n"
        "    w = np.exp(s - s.max(-1, keepdims=True))\n    w = w / w.sum(-1, keepdims=True)\n"
        "    return (w @ V).transpose(1, 0, 2).reshape(T, d) @ W_o, w", "multi_head_attention")
    # the explorer's numbers for T = 32, no mask, every n_heads: the views it shows are compute_view's
    # (MultiHeadExplorer.compute; test_each_control_redraws_what_the_reference_computes checks them and the picture),
    # taken here without drawing ten pictures
    inputs, mean_entropy = mh.draw_inputs(0), {}
    for name, function in (("reference", multi_head_attention), ("÷√d_model", scaled_by_d_model)):
        mean_entropy[name] = [mh.compute_view(function, ref.attention_entropy, mh.Settings(32, n_heads, 0, False, seed=0),
                                              inputs).entropy.mean() for n_heads in mh.N_HEADS_OPTIONS]
    reference, wrong = np.array(mean_entropy["reference"]), np.array(mean_entropy["÷√d_model"])
    assert reference.max() - reference.min() < 0.3
    assert wrong[0] == pytest.approx(reference[0])  # one head: d_head = d_model, the two agree
    assert wrong[-1] > reference[-1] + 0.5


def test_mask_on_zeroes_every_heads_upper_triangle_and_off_does_not(explorer):
    explorer.T_slider.value = 20
    assert np.all(np.triu(explorer.view.weights, 1) == 0)
    assert "no head puts weight on a future key" in explorer.summary.value
    zero = (np.array(mh.colormaps[mh.COLORMAP](0.0)[:3]) * 255).round()
    head_panel = rect_pixels(explorer, mh.HEAD_RECT)
    upper_right = head_panel[: head_panel.shape[0] // 4, -head_panel.shape[1] // 4:]
    assert np.abs(upper_right - zero).max() <= 2
    explorer.causal_box.value = False
    assert np.count_nonzero(np.triu(explorer.view.weights, 1)) == 4 * 20 * 19 // 2
    assert f"{4 * 20 * 19 // 2} weights on future keys (above the diagonal) are not zero" in explorer.summary.value
    head_panel = rect_pixels(explorer, mh.HEAD_RECT)
    assert np.abs(head_panel[: head_panel.shape[0] // 4, -head_panel.shape[1] // 4:] - zero).max() > 2


def test_the_selected_head_is_framed_and_its_bar_highlighted(explorer):
    orange = colour(mh.HIGHLIGHT)
    frames = {}
    for head in range(4):
        explorer.head_slider.value = head
        mosaic_panel = rect_pixels(explorer, mh.MOSAIC_RECT)
        rows, columns = np.nonzero(np.abs(mosaic_panel - orange).max(axis=-1) <= 3)
        assert rows.size > 0
        frames[head] = (rows.mean() < mosaic_panel.shape[0] / 2, columns.mean() < mosaic_panel.shape[1] / 2)
        assert count_colour(rect_pixels(explorer, mh.ENTROPY_RECT), orange) > 50
    # head 0 top left, 1 top right, 2 bottom left, 3 bottom right
    assert frames == {0: (True, True), 1: (True, False), 2: (False, True), 3: (False, False)}


def test_one_head_has_no_frame_and_no_most_focused_line():
    explorer = mh.MultiHeadExplorer(*FUNCTIONS, T=8, n_heads=1, sync=True)
    assert not explorer.figure.frame.get_visible()
    assert "1 head of d_head = 64" in explorer.summary.value and "most focused" not in explorer.summary.value
    check_matches_reference(explorer)


def test_mosaic_layout_helpers():
    assert [mh.grid_shape(n) for n in mh.N_HEADS_OPTIONS] == [(1, 1), (1, 2), (2, 2), (2, 4), (4, 4)]
    assert mh.gap(8) == 1 and mh.gap(64) == 4
    weights = np.arange(3 * 2 * 2, dtype=float).reshape(3, 2, 2) / 12
    tiled = mh.mosaic(weights)  # grid 1 × 3, gap 1
    assert tiled.shape == (2, 3 * 2 + 2)
    for head in range(3):
        top, left = mh.tile_origin(head, 3, 2)
        np.testing.assert_array_equal(tiled[top:top + 2, left:left + 2], weights[head])
    assert np.isnan(tiled[:, 2]).all() and np.isnan(tiled[:, 5]).all()


def test_one_figure_and_one_image_are_reused_and_inputs_drawn_once_per_seed(explorer, monkeypatch):
    calls = []
    original = mh.draw_inputs
    monkeypatch.setattr(mh, "draw_inputs", lambda seed: calls.append(seed) or original(seed))
    figure, image = explorer.figure.figure, explorer.image
    for T in range(13, 18):
        explorer.T_slider.value = T
        explorer.head_slider.value = T % 4
    assert explorer.figure.figure is figure and explorer.image is image and calls == []
    explorer.seed_slider.value = 5
    explorer.T_slider.value = 30
    assert calls == [5]
    explorer.resample.click()
    assert explorer.seed_slider.value == 6 and calls == [5, 6]
    check_matches_reference(explorer)


def test_learner_error_is_shown_as_one_message_and_the_fix_is_picked_up():
    namespace = {"np": np}
    exec("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n    raise NotImplementedError()",
         namespace)
    explorer = mh.MultiHeadExplorer(namespace["multi_head_attention"], ref.attention_entropy, T=6, sync=True)
    assert explorer.view is None and explorer.error == "multi_head_attention raised NotImplementedError"
    assert "⚠ multi_head_attention raised NotImplementedError" in explorer.summary.value
    assert np.isnan(np.ma.filled(explorer.figure.head_image.get_array().astype(float), np.nan)).all()
    assert all(bar.get_height() == 0 for bar in explorer.figure.bars)
    # The learner fixes the cell and re-runs it; the explorer uses the new definition at the next change.
    exec("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
         "    T = len(x)\n    w = np.full((n_heads, T, T), 1.0 / T)\n    return x, w", namespace)
    explorer.T_slider.value = 7
    assert explorer.error is None
    np.testing.assert_allclose(explorer.view.weights, 1 / 7)
    # this "fix" ignores the mask: the summary counts the weights above the diagonal, 21 per head
    assert "84 weights on future keys (above the diagonal) are not zero" in explorer.summary.value


@pytest.mark.parametrize("source, message", [
    ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
     "    T = len(x)\n    return x, np.full((T, T), 1.0 / T)",
     "returned weights of shape (6, 6); expected (n_heads, T, T) = (4, 6, 6)"),
    ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n    return x",
     "should return (output, weights); it returned ndarray"),
    ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
     "    w = np.full((n_heads, len(x), len(x)), 0.1)\n    w[2, 3, 1] = np.nan\n    return x, w",
     "returned 1 NaN or infinite weight(s), first in head 2, query row 3"),
    ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
     "    return x, np.full((n_heads, len(x), len(x)), 1 / len(x)) + 0j",
     "returned weights of dtype complex128"),
])
def test_wrong_results_from_the_learner_are_explained(source, message):
    explorer = mh.MultiHeadExplorer(learner(source, "multi_head_attention"), ref.attention_entropy, T=6, n_heads=4,
                                    sync=True)
    assert explorer.view is None and message in explorer.error
    assert message in explorer.summary.value


def test_entropy_errors_are_explained():
    nan_entropy = learner("def attention_entropy(w):\n    return -np.sum(w * np.log(w), axis=-1)", "attention_entropy")
    explorer = mh.MultiHeadExplorer(multi_head_attention, nan_entropy, T=6, sync=True)
    assert "0 · log 0 must count as 0" in explorer.error
    flat_entropy = learner("def attention_entropy(w):\n    return np.zeros(w.shape[-1])", "attention_entropy")
    explorer = mh.MultiHeadExplorer(multi_head_attention, flat_entropy, T=6, sync=True)
    assert "returned shape (6,); expected (n_heads, T) = (4, 6)" in explorer.error


def test_hanging_functions_give_one_message(monkeypatch):
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.3)  # the visuals share its time limit
    hanging = learner("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n    while True:\n"
                      "        pass", "multi_head_attention")
    explorer = mh.MultiHeadExplorer(hanging, ref.attention_entropy, T=6, sync=True)
    assert "did not finish within 0.3 s" in explorer.error


def test_functions_that_modify_their_inputs_do_not_corrupt_the_picture():
    in_place = learner("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                       "    x *= 0\n    W_q[:] = 0\n"
                       "    T = len(x)\n    return x, np.full((n_heads, T, T), 1.0 / T)", "multi_head_attention")
    explorer = mh.MultiHeadExplorer(in_place, ref.attention_entropy, T=6, sync=True)
    explorer.T_slider.value = 7
    inputs = explorer._current_inputs(0)
    fresh = mh.draw_inputs(0)
    for cached, original in zip(inputs, fresh):
        np.testing.assert_array_equal(cached, original)


def test_bad_initial_settings_raise_value_error():
    with pytest.raises(ValueError, match="T must be an integer between 2 and 64; received 1"):
        mh.MultiHeadExplorer(*FUNCTIONS, T=1)
    with pytest.raises(ValueError, match=r"n_heads must be one of \(1, 2, 4, 8, 16\) \(divisors of d_model = 64\); "
                                         "received 3"):
        mh.MultiHeadExplorer(*FUNCTIONS, n_heads=3)
    with pytest.raises(ValueError, match="head must be an integer between 0 and n_heads - 1 = 3; received 4"):
        mh.MultiHeadExplorer(*FUNCTIONS, n_heads=4, head=4)


def test_not_shown_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert mh.explore_multi_head(*FUNCTIONS) is None
    assert capsys.readouterr().out.strip() == "(the multi-head explorer is not shown while grading)"
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert isinstance(mh.explore_multi_head(*FUNCTIONS, T=4), mh.MultiHeadExplorer)


def test_changes_arriving_before_a_pending_redraw_are_merged():
    import asyncio

    async def scenario():
        explorer = mh.MultiHeadExplorer(*FUNCTIONS, T=10)
        start = explorer.redraws
        for T in range(11, 31):  # 20 rapid changes in one burst
            explorer.T_slider.value = T
        explorer.heads_slider.value = 8
        assert explorer.redraws == start  # nothing is drawn while the burst arrives
        await explorer.drawn()  # the one pending redraw has run
        return explorer, explorer.redraws - start

    explorer, redraws = asyncio.run(scenario())
    assert redraws == 1
    assert explorer.view.weights.shape == (8, 30, 30)
    check_matches_reference(explorer)


def test_controls_have_labels_and_tooltips(untouched_explorer):
    explorer = untouched_explorer
    for control in (explorer.T_slider, explorer.heads_slider, explorer.head_slider, explorer.causal_box,
                    explorer.seed_slider, explorer.resample):
        assert control.description and control.tooltip
    assert "d_head = 64 / n_heads" in explorer.heads_slider.tooltip
    assert explorer.heads_slider.options == mh.N_HEADS_OPTIONS
    assert all(mh.D_MODEL % n == 0 for n in mh.N_HEADS_OPTIONS)


def test_axes_say_query_and_key_position_and_nats(untouched_explorer):
    explorer = untouched_explorer
    figure = explorer.figure
    assert figure.head_ax.get_xlabel() == "key position" and figure.head_ax.get_ylabel() == "query position"
    assert "key position" in figure.mosaic_ax.get_xlabel() and figure.mosaic_ax.get_ylabel() == "query position"
    assert figure.entropy_ax.get_ylabel() == "mean row entropy (nats)" and figure.entropy_ax.get_xlabel() == "head"
    assert figure.head_title.get_text() == "head 1 of 4 (d_head = 16)"
    image = figure.head_image
    assert image.get_cmap().name == mh.COLORMAP and image.get_clim() == (1e-4, 1.0)  # logarithmic by default
    assert figure.colour_bar_ax.get_ylabel() == "attention weight (log scale, 10⁻⁴–1)"


@pytest.mark.parametrize("name", list(plots.COLOUR_SCALES))
def test_colour_scale_applies_to_the_head_and_each_tile_of_the_mosaic(explorer, name):
    explorer.colour_dropdown.value = name
    check_matches_reference(explorer)
    figure = explorer.figure
    assert figure.colour_bar_ax.get_ylabel() == plots.COLOUR_SCALES[name].label
    weights, _ = expected(12, 4, True, 0)
    drawn = weights / weights.max(axis=-1, keepdims=True) if name == "row-normalised" else weights
    tiles = np.ma.filled(figure.mosaic_image.get_array().astype(float), np.nan)
    for head in range(4):  # row-normalised per head: every row of every tile reaches 1
        top, left = mh.tile_origin(head, 4, 12)
        np.testing.assert_allclose(tiles[top:top + 12, left:left + 12], drawn[head], rtol=1e-12)
    norm = LogNorm(1e-4, 1.0, clip=True) if name == "logarithmic" else Normalize(0.0, 1.0, clip=True)
    img = pixels(explorer)
    height, width = img.shape[:2]
    left, bottom, w, h = mh.HEAD_RECT
    for row, col in [(2, 1), (6, 3), (11, 11), (11, 5), (1, 8)]:
        x, y = (left + w * (col + 0.5) / 12) * width, (1 - bottom - h + h * (row + 0.5) / 12) * height
        want = (np.array(mh.colormaps[mh.COLORMAP](norm(drawn[1, row, col]))[:3]) * 255).round()
        assert np.abs(img[int(y), int(x)] - want).max() <= 2, (name, row, col)


def test_largest_weight_skips_row_0_under_the_causal_mask():
    weights, _ = expected(12, 4, True, 0)
    explorer = mh.MultiHeadExplorer(*FUNCTIONS, T=12, n_heads=4, head=1, sync=True)
    assert weights[1, 0, 0] == 1.0 and weights[1, 1:].max() < 0.999
    assert (f"and largest weight outside row 0 (always 1 under the causal mask) {weights[1, 1:].max():.3f}"
            in explorer.summary.value)
