"""The attention explorer, driven headlessly: each control redraws exactly what the reference computes."""

import io
import math

import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.colors import LogNorm, Normalize
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from attention_lab.a01_attention import visual as ex
from attention_lab.core import explorer as explorer_module
from attention_lab.core import plots
from autograder.assignments.a01_attention import reference as ref
from notebook_harness import namespace_with

FUNCTIONS = (ref.scaled_dot_product_attention, ref.causal_mask, ref.attention_entropy)


@pytest.fixture
def explorer():
    return ex.AttentionExplorer(*FUNCTIONS, T=12, d_head=16, sync=True)


@pytest.fixture(scope="module")
def untouched_explorer():
    """A new explorer as ``explorer`` builds it, shared by the tests that only read it (no control moves)."""
    return ex.AttentionExplorer(*FUNCTIONS, T=12, d_head=16, sync=True)


def expected(T, d, scale, causal, seed):
    Q, K, V = (a[:T, :d] for a in ex.draw_inputs(seed))
    _, w = ref.scaled_dot_product_attention(Q, K, V, mask=ref.causal_mask(T) if causal else None, scale=scale)
    return w, ref.attention_entropy(w)


def pixels(explorer):
    return np.asarray(Image.open(io.BytesIO(explorer.image.value)).convert("RGB"))


def heatmap_pixel(explorer, row, col):
    """Colour at the centre of heatmap cell (query row, key col), from the rendered PNG."""
    img = pixels(explorer)
    height, width = img.shape[:2]
    left, bottom, w, h = ex.HEATMAP_RECT
    T = explorer.settings.T
    x = (left + w * (col + 0.5) / T) * width
    y = (1 - bottom - h + h * (row + 0.5) / T) * height
    return img[int(y), int(x)].astype(int)


def check_matches_reference(explorer):
    s = explorer.settings
    w, H = expected(s.T, s.d_head, s.scale, s.causal, s.seed)
    np.testing.assert_allclose(explorer.view.weights, w, rtol=1e-12)
    np.testing.assert_allclose(explorer.figure.image.get_array(), explorer.figure.colour_scale.values(w), rtol=1e-12)
    np.testing.assert_allclose(explorer.figure.entropy_line.get_ydata(), H, rtol=1e-12)
    ceiling = np.log(np.arange(s.T) + 1.0) if s.causal else np.full(s.T, math.log(s.T))
    np.testing.assert_allclose(explorer.figure.ceiling_line.get_ydata(), ceiling)
    largest = (f"largest weight outside row 0 (always 1 under the causal mask) {w[1:].max():.3f}" if s.causal
               else f"largest weight {w.max():.3f}")
    assert largest in explorer.summary.value
    assert f"mean row entropy {H.mean():.2f} nats" in explorer.summary.value
    assert f"T = {s.T}, d_head = {s.d_head}" in explorer.summary.value


@pytest.mark.parametrize("control, value", [("T_slider", 40), ("d_slider", 512), ("d_slider", 1),
                                            ("scale_box", False), ("causal_box", False), ("seed_slider", 7)])
def test_each_control_redraws_what_the_reference_computes(explorer, control, value):
    before = explorer.image.value
    getattr(explorer, control).value = value
    check_matches_reference(explorer)
    assert explorer.image.value != before


def test_mask_on_zeroes_the_upper_triangle_and_off_does_not(explorer):
    explorer.T_slider.value = 20
    assert np.all(np.triu(explorer.view.weights, 1) == 0)
    assert "every weight above the diagonal is zero" in explorer.summary.value
    zero_colour = (np.array(ex.colormaps[ex.COLORMAP](0.0)[:3]) * 255).round()
    assert np.abs(heatmap_pixel(explorer, 2, 17) - zero_colour).max() <= 2
    explorer.causal_box.value = False
    assert np.count_nonzero(np.triu(explorer.view.weights, 1)) == 20 * 19 // 2
    assert "weights above the diagonal are not zero" in explorer.summary.value
    assert np.abs(heatmap_pixel(explorer, 2, 17) - zero_colour).max() > 2


def test_entropy_curves_show_saturation_and_mark_d_head(explorer):
    explorer.T_slider.value = 32
    explorer.causal_box.value = False
    curves = {name: line.get_ydata() for name, line in explorer.figure.curve_lines.items()}
    d = np.array(ex.CURVE_D_HEADS)
    assert list(explorer.figure.curve_lines["unscaled"].get_xdata()) == list(d)
    assert curves["unscaled"][d == 256][0] < 0.5 < 2.5 < curves["scaled (÷√d)"][d == 256][0]
    assert curves["÷d"][d == 512][0] > 0.95 * math.log(32)  # ÷d drives rows to uniform (ln T)
    explorer.d_slider.value = 91
    assert list(explorer.figure.marker.get_xdata()) == [91, 91]


def test_curves_match_the_reference_on_the_sampled_rows(explorer):
    explorer.T_slider.value = 100
    rows = np.unique(np.linspace(0, 99, ex.CURVE_QUERIES).round().astype(int))
    Q, K, V = ex.draw_inputs(0)
    mask = ref.causal_mask(100)[rows]
    d = 32
    _, w = ref.scaled_dot_product_attention(Q[rows, :d] / math.sqrt(d), K[:100, :d], V[:100, :d], mask=mask)
    index = ex.CURVE_D_HEADS.index(d)
    assert explorer.figure.curve_lines["÷d"].get_ydata()[index] == pytest.approx(ref.attention_entropy(w).mean())


def test_one_figure_and_one_image_are_reused_across_20_changes(explorer):
    image, figure, canvas, artist = explorer.image, explorer.figure.figure, explorer.figure.canvas, explorer.figure.image
    redraws = explorer.redraws
    for step in range(20):
        [explorer.T_slider, explorer.d_slider][step % 2].value = (
            5 + step if step % 2 == 0 else ex.D_HEAD_OPTIONS[step % len(ex.D_HEAD_OPTIONS)])
    assert explorer.redraws == redraws + 20
    assert explorer.image is image and explorer.figure.figure is figure and explorer.figure.canvas is canvas
    assert explorer.figure.image is artist and len(figure.axes) == 4


def test_inputs_are_drawn_once_per_seed(explorer):
    first = explorer._inputs
    explorer.T_slider.value = 30
    explorer.d_slider.value = 128
    assert explorer._inputs is first
    explorer.seed_slider.value = 3
    assert explorer._inputs is not first
    explorer.resample.click()
    assert explorer.seed_slider.value == 4


def test_learner_error_is_shown_as_one_message_and_fix_is_picked_up():
    namespace = namespace_with({
        "softmax": "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n    return e / e.sum(axis, keepdims=True)",
        "causal_mask": "def causal_mask(T):\n    raise NotImplementedError()",
        "scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                        "    raise NotImplementedError()",
    })
    explorer = ex.AttentionExplorer(namespace["scaled_dot_product_attention"], namespace["causal_mask"],
                                    ref.attention_entropy, T=8, d_head=4, sync=True)
    assert explorer.view is None and "NotImplementedError" in explorer.summary.value
    assert explorer.error == "causal_mask raised NotImplementedError"
    # The learner fixes both cells and re-runs them; the explorer uses the new definitions on the next change.
    namespace_fix = {
        "causal_mask": "def causal_mask(T):\n    return np.triu(np.ones((T, T), dtype=bool))",  # flipped!
        "scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                        "    s = Q @ K.T / (np.sqrt(Q.shape[-1]) if scale else 1)\n"
                                        "    s = s if mask is None else np.where(mask, s, -np.inf)\n"
                                        "    w = softmax(s)\n    return w @ V, w",
    }
    for source in namespace_fix.values():
        exec(source, namespace)
    explorer.d_slider.value = 8
    assert explorer.error is None
    assert np.all(np.tril(explorer.view.weights, -1) == 0)  # the flipped mask lights the upper triangle
    assert "weights above the diagonal are not zero" in explorer.summary.value


def test_wrong_shape_from_the_learner_is_explained():
    bad = {"scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                           "    w = np.ones((K.shape[0], Q.shape[0]))\n    return w @ V, w.T[:, :2]"}
    namespace = namespace_with(bad)
    explorer = ex.AttentionExplorer(namespace["scaled_dot_product_attention"], ref.causal_mask, ref.attention_entropy,
                                    T=6, d_head=4, sync=True)
    assert "returned weights of shape (6, 2); expected (T, T) = (6, 6)" in explorer.summary.value


def test_bad_initial_settings_raise_value_error():
    with pytest.raises(ValueError, match="T must be between 2 and 512; received 1"):
        ex.AttentionExplorer(*FUNCTIONS, T=1)
    with pytest.raises(ValueError, match="d_head must be one of"):
        ex.AttentionExplorer(*FUNCTIONS, d_head=100)


def test_not_shown_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert ex.explore_attention(*FUNCTIONS) is None
    assert "not shown while grading" in capsys.readouterr().out
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert isinstance(ex.explore_attention(*FUNCTIONS, T=4), ex.AttentionExplorer)


def test_changes_arriving_before_a_pending_redraw_are_merged():
    import asyncio

    async def scenario():
        explorer = ex.AttentionExplorer(*FUNCTIONS, T=10, d_head=16)
        start = explorer.redraws
        for T in range(11, 31):  # 20 rapid changes in one burst
            explorer.T_slider.value = T
        assert explorer.redraws == start  # nothing is drawn while the burst arrives
        await explorer.drawn()  # the one pending redraw has run
        return explorer, explorer.redraws - start

    explorer, redraws = asyncio.run(scenario())
    assert redraws == 1
    assert explorer.view.weights.shape == (30, 30)
    check_matches_reference(explorer)


def test_waiting_for_the_redraw_returns_once_the_latest_change_is_drawn():
    import asyncio

    async def scenario():
        explorer = ex.AttentionExplorer(*FUNCTIONS, T=10, d_head=16)
        await explorer.drawn()  # nothing pending: returns at once
        shapes = []
        for T in (11, 12):
            explorer.T_slider.value = T
            await explorer.drawn()
            shapes.append(explorer.view.weights.shape)
        return shapes

    assert asyncio.run(scenario()) == [(11, 11), (12, 12)]


def test_every_visual_is_built_on_the_one_explorer_base():
    from attention_lab.a02_multi_head.visual import MultiHeadExplorer
    from attention_lab.a03_positional.visual import PositionalExplorer
    from attention_lab.a04_masking.visual import MaskingExplorer
    from attention_lab.a05_kv_cache.visual import CacheCostExplorer
    from attention_lab.a09_tiny_gpt.visual import HeadsExplorer

    for explorer_class in (ex.AttentionExplorer, MultiHeadExplorer, PositionalExplorer, MaskingExplorer,
                           CacheCostExplorer, HeadsExplorer):
        assert issubclass(explorer_class, explorer_module.Explorer)
        assert "redraw" not in vars(explorer_class) and "_on_change" not in vars(explorer_class)


def test_the_heatmap_explorers_take_their_functions_t_slider_and_colour_scale_from_one_base():
    from attention_lab.a02_multi_head import visual as multi_head
    from attention_lab.a04_masking import visual as masking
    from autograder.assignments.a02_multi_head.reference import multi_head_attention
    from autograder.assignments.a04_masking import reference as masking_ref

    heads = (multi_head_attention, ref.attention_entropy)
    masks = (masking_ref.padding_mask, masking_ref.causal_padding_mask, masking_ref.masked_softmax)
    for made, functions, T, T_max, counted, scale in [
            (ex.AttentionExplorer(*FUNCTIONS, T=12, sync=True), FUNCTIONS, 12, 512, "sequence length", "logarithmic"),
            (multi_head.MultiHeadExplorer(*heads, T=6, colour_scale="row-normalised", sync=True), heads, 6, 64,
             "sequence length", "row-normalised"),
            (masking.MaskingExplorer(*masks, T=8, sync=True), masks, 8, 24, "padded length", "logarithmic")]:
        assert isinstance(made, explorer_module.HeatmapExplorer) and made.functions == functions
        slider = made.T_slider
        assert (slider.description, slider.value, slider.min, slider.max) == ("T", T, 2, T_max)
        assert slider.tooltip == f"{counted}: number of query and key positions"
        assert made.colour_dropdown.options == tuple(plots.COLOUR_SCALES)
        assert made.colour_dropdown.value == made.settings.colour_scale == scale
        rows = [getattr(part, "children", ()) for part in made.widget.children]  # the rows of controls
        assert slider in rows[0] and any(made.colour_dropdown in row for row in rows)  # laid out, so they redraw
    with pytest.raises(ValueError, match="colour_scale must be one of"):
        masking.MaskingExplorer(*masks, colour_scale="log", sync=True)


def test_controls_have_labels_and_tooltips(untouched_explorer):
    explorer = untouched_explorer
    for control in (explorer.T_slider, explorer.d_slider, explorer.scale_box, explorer.causal_box,
                    explorer.seed_slider, explorer.resample):
        assert control.description and control.tooltip
    assert explorer.T_slider.min == 2 and explorer.T_slider.max == 512
    assert explorer.d_slider.options[0] == 1 and explorer.d_slider.options[-1] == 512
    ratios = np.diff(np.log(ex.D_HEAD_OPTIONS))
    assert ratios.max() < 0.75  # log-spaced steps, at most about ×2 apart


def test_axes_say_query_and_key_position_and_nats(untouched_explorer):
    explorer = untouched_explorer
    f = explorer.figure
    assert (f.heat_ax.get_xlabel(), f.heat_ax.get_ylabel()) == ("key position", "query position")
    assert f.entropy_ax.get_xlabel() == "query position" and "nats" in f.entropy_ax.get_ylabel()
    assert "nats" in f.curve_ax.get_ylabel() and f.curve_ax.get_xscale() == "log"
    assert f.image.get_cmap().name == "viridis"
    assert f.image.get_clim() == (1e-4, 1.0) and isinstance(f.image.norm, LogNorm)  # the default: logarithmic
    assert f.colour_bar_ax.get_ylabel() == "attention weight (log scale, 10⁻⁴–1)"


def learner(source, name):
    return namespace_with({name: source})[name]


def test_nan_weights_and_nan_entropies_are_explained_not_miscounted():
    blocked_diagonal = learner("def causal_mask(T):\n    return np.tril(np.ones((T, T), dtype=bool), k=-1)", "causal_mask")
    minus_inf_attention = learner("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                  "    s = Q @ K.T / np.sqrt(Q.shape[-1])\n"
                                  "    s = s if mask is None else np.where(mask, s, -np.inf)\n"
                                  "    e = np.exp(s - s.max(-1, keepdims=True))\n"
                                  "    w = e / e.sum(-1, keepdims=True)\n    return w @ V, w",
                                  "scaled_dot_product_attention")
    explorer = ex.AttentionExplorer(minus_inf_attention, blocked_diagonal, ref.attention_entropy, T=12, d_head=16,
                                    sync=True)
    assert "NaN or infinite weight" in explorer.error and "does the mask allow the diagonal" in explorer.error
    assert "above the diagonal" not in explorer.summary.value
    nan_entropy = learner("def attention_entropy(w):\n    return -np.sum(w * np.log(w), axis=-1)", "attention_entropy")
    explorer = ex.AttentionExplorer(ref.scaled_dot_product_attention, ref.causal_mask, nan_entropy, T=12, d_head=16,
                                    sync=True)
    assert "0 · log 0 must count as 0" in explorer.error


def test_functions_that_modify_their_inputs_do_not_corrupt_the_picture():
    in_place_entropy = learner("def attention_entropy(w):\n    w[w == 0] = 1\n    return -np.sum(w * np.log(w), axis=-1)",
                               "attention_entropy")
    in_place_attention = learner("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                 "    Q /= np.sqrt(Q.shape[-1]) if scale else 1\n    s = Q @ K.T\n"
                                 "    s = s if mask is None else np.where(mask, s, -np.inf)\n"
                                 "    e = np.exp(s - s.max(-1, keepdims=True))\n    w = e / e.sum(-1, keepdims=True)\n"
                                 "    return w @ V, w", "scaled_dot_product_attention")
    explorer = ex.AttentionExplorer(in_place_attention, ref.causal_mask, in_place_entropy, T=16, d_head=64, sync=True)
    explorer.d_slider.value = 32
    explorer.d_slider.value = 64
    check_matches_reference(explorer)
    assert np.all(np.triu(explorer.view.weights, 1) == 0)


def test_complex_weights_and_hanging_functions_give_one_message(monkeypatch):
    complex_attention = learner("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                "    w = np.full((Q.shape[0], K.shape[0]), 1 / K.shape[0]) + 0j\n    return w @ V, w",
                                "scaled_dot_product_attention")
    explorer = ex.AttentionExplorer(complex_attention, ref.causal_mask, ref.attention_entropy, T=6, d_head=4,
                                    sync=True)
    assert "dtype complex128" in explorer.error
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.3)  # the visuals share its time limit
    hanging = learner("def causal_mask(T):\n    while True:\n        pass", "causal_mask")
    explorer = ex.AttentionExplorer(ref.scaled_dot_product_attention, hanging, ref.attention_entropy, T=6, d_head=4,
                                    sync=True)
    assert "did not finish within 0.3 s" in explorer.error


def test_one_weight_above_the_diagonal_is_singular(explorer):
    explorer.T_slider.value = 2
    explorer.causal_box.value = False
    assert "1 weight above the diagonal is not zero" in explorer.summary.value


@pytest.mark.parametrize("T, causal", [(2, False), (40, True), (512, False)])
def test_no_line_reaches_the_legends(explorer, T, causal):
    explorer.T_slider.value = T
    explorer.causal_box.value = causal
    figure = explorer.figure
    figure.canvas.draw()
    for ax, legend in ((figure.entropy_ax, figure.entropy_legend), (figure.curve_ax, figure.curve_legend)):
        legend_bottom = ax.transData.inverted().transform(legend.get_window_extent().get_points())[0, 1]
        highest = max(np.nanmax(line.get_ydata()) for line in ax.get_lines() if len(line.get_ydata()))
        assert highest < legend_bottom, (T, causal, highest, legend_bottom)


def lightness(rgb):
    """CIELAB L* (0 black … 100 white) of sRGB colours with channels 0 … 255, shape (..., 3)."""
    linear = np.asarray(rgb, dtype=float) / 255
    linear = np.where(linear <= 0.04045, linear / 12.92, ((linear + 0.055) / 1.055) ** 2.4)
    Y = linear @ np.array([0.2126, 0.7152, 0.0722])
    return np.where(Y > (6 / 29) ** 3, 116 * np.cbrt(Y) - 16, Y * (29 / 3) ** 3)


def triangle_lightness(explorer):
    """Median L* of the drawn pixels of allowed cells (key ≤ query) and of blocked ones, away from the diagonal."""
    img = pixels(explorer)
    height, width = img.shape[:2]
    left, bottom, w, h = ex.HEATMAP_RECT
    xs = np.arange(int(left * width) + 2, int((left + w) * width) - 2)
    ys = np.arange(int((1 - bottom - h) * height) + 2, int((1 - bottom) * height) - 2)
    col = (xs + 0.5 - left * width) / (w * width)  # fraction of the key axis, 0 … 1
    row = (ys + 0.5 - (1 - bottom - h) * height) / (h * height)
    below = row[:, None] - col[None, :]  # > 0: below the diagonal, where keys are allowed
    L = lightness(img[np.ix_(ys, xs)])
    return np.median(L[below > 0.05]), np.median(L[below < -0.05])


def test_default_colour_scale_keeps_the_causal_triangle_visible_at_T_512():
    explorer = ex.AttentionExplorer(*FUNCTIONS, T=512, d_head=64, sync=True)
    assert explorer.colour_dropdown.value == plots.DEFAULT_COLOUR_SCALE == "logarithmic"
    allowed, blocked = triangle_lightness(explorer)
    assert allowed - blocked > 15, (allowed, blocked)  # L* units: the triangle stands out clearly
    explorer.colour_dropdown.value = "linear 0–1"  # what the default replaced: weights ≈ 1/T drawn almost black
    allowed, blocked = triangle_lightness(explorer)
    assert allowed - blocked < 3, (allowed, blocked)


@pytest.mark.parametrize("name", list(plots.COLOUR_SCALES))
def test_colour_scale_control_redraws_each_cell_and_the_colour_bar_names_the_scale(explorer, name):
    explorer.colour_dropdown.value = name
    scale = plots.COLOUR_SCALES[name]
    assert explorer.figure.colour_bar_ax.get_ylabel() == scale.label
    assert {"linear 0–1": "linear, 0–1", "row-normalised": "row's largest",
            "logarithmic": "log scale"}[name] in scale.label
    w, _ = expected(12, 16, True, True, 0)
    drawn = w / w.max(axis=1, keepdims=True) if name == "row-normalised" else w
    np.testing.assert_allclose(explorer.figure.image.get_array(), drawn, rtol=1e-12)
    norm = LogNorm(1e-4, 1.0, clip=True) if name == "logarithmic" else Normalize(0.0, 1.0, clip=True)
    for row, col in [(3, 1), (7, 2), (11, 10), (11, 0), (2, 9)]:
        want = (np.array(colormaps["viridis"](norm(drawn[row, col]))[:3]) * 255).round()
        assert np.abs(heatmap_pixel(explorer, row, col) - want).max() <= 2, (name, row, col)


def test_unknown_colour_scale_is_refused():
    with pytest.raises(ValueError, match="colour_scale must be one of .*'logarithmic'.*received 'log'"):
        ex.AttentionExplorer(*FUNCTIONS, colour_scale="log", sync=True)
    with pytest.raises(ValueError, match="colour_scale must be one of"):
        plots.plot_attention_weights(np.eye(3), colour_scale="viridis")


@pytest.mark.parametrize("causal", [False, True])
def test_scaling_panel_shows_the_uniform_ceiling_in_nats(explorer, causal):
    explorer.T_slider.value = 32
    explorer.causal_box.value = causal
    figure = explorer.figure
    ceiling = np.mean(np.log(np.arange(1, 33))) if causal else math.log(32)
    np.testing.assert_allclose(figure.curve_ceiling.get_ydata(), [ceiling, ceiling])
    assert figure.curve_ceiling in figure.curve_ax.get_lines()
    label = "mean ln(i+1)" if causal else "ln T"
    assert figure.curve_ceiling_text.get_text() == f"uniform ceiling: {label} = {ceiling:.2f} nats"
    assert figure.curve_ceiling_text.get_position()[1] == ceiling
    # ÷d at d_head = 512 reaches it (uniform weights), the scaled curve stays below
    curves = explorer._curves
    assert curves["÷d"][-1] == pytest.approx(ceiling, abs=0.02)
    assert curves["scaled (÷√d)"].max() < ceiling - 0.2


def test_largest_weight_skips_row_0_under_the_causal_mask_and_says_so(explorer):
    explorer.d_slider.value = 1  # little spread: no other row has weight near 1
    w, _ = expected(12, 1, True, True, 0)
    assert w[0, 0] == 1.0 and w[1:].max() < 0.99
    assert (f"largest weight outside row 0 (always 1 under the causal mask) {w[1:].max():.3f}"
            in explorer.summary.value)
    explorer.causal_box.value = False
    w, _ = expected(12, 1, True, False, 0)
    assert f"largest weight {w.max():.3f} ·" in explorer.summary.value
    assert "outside row 0" not in explorer.summary.value


def static_entropy_figure():
    """Assignment 1's static entropy picture (fact 3's cell), drawn with the reference functions."""
    rng = np.random.default_rng(7)
    T, d_head = 32, 256
    Q, K, V = (rng.normal(size=(T, d_head)) for _ in range(3))
    figure = Figure(figsize=(12, 3.4), layout="constrained")  # as plt.subplots(1, 3, ...) in the notebook
    FigureCanvasAgg(figure)  # drawn as the inline backend draws it: the constrained layout runs
    axes = figure.subplots(1, 3)
    for ax, scale in zip(axes[:2], [True, False]):
        _, w = ref.scaled_dot_product_attention(Q, K, V, mask=ref.causal_mask(T), scale=scale)
        plots.plot_attention_weights(w, ax=ax, title=f"causal, d_head = {d_head}, scale={scale}")
        plots.plot_row_entropy(ref.attention_entropy(w), causal=True, ax=axes[2], label=f"scale={scale}",
                               show_ceiling=scale)
    figure.canvas.draw()
    return axes[2]


def test_static_entropy_plot_legend_covers_no_curve():
    ax = static_entropy_figure()
    legend = ax.get_legend()
    box = legend.get_window_extent()
    assert [t.get_text() for t in legend.get_texts()] == ["uniform ceiling ln(i+1)", "scale=True", "scale=False"]
    lines = ax.get_lines()
    assert len(lines) == 3
    for line in lines:
        x, y = line.get_xdata(), line.get_ydata()
        # every data point and 20 points along each segment between them, in display coordinates
        t = np.linspace(0, 1, 21)[:, None]
        xs, ys = (x[:-1] + t * np.diff(x)).ravel(), (y[:-1] + t * np.diff(y)).ravel()
        points = ax.transData.transform(np.column_stack([xs, ys]))
        inside = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) &
                  (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))
        assert not inside.any(), (line.get_label(), points[inside][:3], box)


def test_png_bytes_decode_to_exactly_the_drawn_pixels():
    figure = Figure(figsize=(2.0, 1.0), dpi=50)
    canvas = FigureCanvasAgg(figure)
    figure.add_axes((0.1, 0.1, 0.8, 0.8)).imshow(np.arange(12.0).reshape(3, 4), cmap="viridis")
    canvas.draw()
    decoded = Image.open(io.BytesIO(explorer_module.png_bytes(canvas)))
    assert decoded.format == "PNG" and decoded.mode == "RGB" and decoded.size == (100, 50)
    np.testing.assert_array_equal(np.asarray(decoded), np.asarray(canvas.buffer_rgba())[..., :3])
