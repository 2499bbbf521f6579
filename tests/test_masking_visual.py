"""The masking explorer, driven headlessly: each control redraws what the reference computes; errors are explained."""

import io

import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.colors import LogNorm, Normalize
from PIL import Image

from attention_lab.a04_masking import visual as mx
from attention_lab.core import plots
from autograder.assignments.a04_masking import reference as ref

FUNCTIONS = (ref.padding_mask, ref.causal_padding_mask, ref.masked_softmax)


@pytest.fixture
def explorer():
    return mx.MaskingExplorer(*FUNCTIONS, T=8, lengths=(8, 5, 0), sync=True)


@pytest.fixture(scope="module")
def untouched_explorer():
    """A new explorer as ``explorer`` builds it, shared by the tests that only read it (no control moves)."""
    return mx.MaskingExplorer(*FUNCTIONS, T=8, lengths=(8, 5, 0), sync=True)


def expected(settings):
    """Reference mask, scores and weights for ``settings``, computed independently of the explorer's view."""
    T, lengths = settings.T, list(settings.lengths)
    mask = ref.causal_padding_mask(lengths, T) if settings.causal else \
        np.broadcast_to(ref.padding_mask(lengths, T), (mx.B, T, T))
    with np.errstate(over="ignore"):
        scores = (mx.draw_scores(settings.seed)[:, :T, :T] * settings.logit_size).astype(settings.dtype)
    return mask, scores, ref.masked_softmax(scores, mask)


def drawn(explorer, b):
    """The RGBA array the heatmap of sequence ``b`` currently shows."""
    return np.asarray(explorer.figure.images[b].get_array())


def pixel(explorer, b, row, col):
    """Colour at the centre of cell (query row, key col) of sequence b's heatmap, from the rendered PNG."""
    img = np.asarray(Image.open(io.BytesIO(explorer.image.value)).convert("RGB"))
    height, width = img.shape[:2]
    left, bottom, w, h = mx.HEATMAP_RECTS[b]
    T = explorer.settings.T
    x = (left + w * (col + 0.5) / T) * width
    y = (1 - bottom - h + h * (row + 0.5) / T) * height
    return img[int(y), int(x)].astype(int)


def rgb(colour):
    return (np.array(colour[:3]) * 255).round()


def check_matches_reference(explorer):
    mask, scores, weights = expected(explorer.settings)
    view = explorer.view
    np.testing.assert_array_equal(view.mask, mask)
    np.testing.assert_array_equal(view.scores, scores)
    np.testing.assert_array_equal(view.weights, weights)
    assert view.weights.dtype == np.dtype(explorer.settings.dtype)
    for b in range(mx.B):
        scale = plots.COLOUR_SCALES[explorer.settings.colour_scale]
        np.testing.assert_allclose(drawn(explorer, b), mx.colours(weights[b], mask[b], scale))
        assert explorer.figure.heat_axes[b].get_title() == f"sequence {b}: length {explorer.settings.lengths[b]}"
    largest = max(float(np.abs(scores.astype(float)).max()), 1.0)
    assert explorer.figure.logit_line.get_xdata()[0] == pytest.approx(largest)


@pytest.mark.parametrize("control, value", [("T_slider", 20), ("causal_box", False), ("dtype_buttons", "float16"),
                                            ("dtype_buttons", "float64"), ("logit_slider", 1000),
                                            ("seed_slider", 7)])
def test_each_control_redraws_what_the_reference_computes(explorer, control, value):
    before = explorer.image.value
    getattr(explorer, control).value = value
    check_matches_reference(explorer)
    assert explorer.image.value != before
    assert explorer.error is None


def test_length_sliders_redraw_and_follow_T(explorer):
    explorer.length_sliders[1].value = 2
    check_matches_reference(explorer)
    assert explorer.view.mask[1, :, 2:].any() is np.False_
    explorer.T_slider.value = 4  # lengths 8 and 2 must fit: the first is clamped to 4
    assert explorer.settings.lengths == (4, 2, 0)
    assert [s.max for s in explorer.length_sliders] == [4, 4, 4]
    check_matches_reference(explorer)


def test_padding_is_black_in_every_row_and_an_empty_sequence_is_all_black(explorer):
    black = rgb(mx.BLOCKED)
    for row in range(8):
        assert np.abs(pixel(explorer, 1, row, 6) - black).max() <= 2  # key 6 of a sequence of length 5
        assert np.abs(pixel(explorer, 2, row, 0) - black).max() <= 2  # the empty sequence
    assert np.abs(pixel(explorer, 0, 7, 0) - black).max() > 2  # a real, allowed key is coloured by its weight
    assert "✓ the 8 fully masked rows are all zero" in explorer.summary.value
    assert "✓ blocked keys have weight 0" in explorer.summary.value


def test_causal_off_leaves_only_the_padding_blocked(explorer):
    explorer.causal_box.value = False
    mask = explorer.view.mask
    assert mask[0].all() and mask[1, :, :5].all() and not mask[1, :, 5:].any()
    assert "padding mask ·" in explorer.summary.value


def test_float16_large_logits_stay_finite_and_the_overflow_threshold_is_reported(explorer):
    explorer.dtype_buttons.value = "float16"
    explorer.logit_slider.value = 1000
    assert np.all(np.isfinite(explorer.view.weights))
    assert "a softmax without max subtraction overflows here" in explorer.summary.value
    assert "ln(max float16) = 11.1" in explorer.summary.value
    assert "−1e9</td><td><code>-inf" in explorer.table.value  # −1e9 does not fit in float16
    assert [bar.get_facecolor() for bar in explorer.figure.bars][0] == pytest.approx(mx.to_rgba(mx.CURRENT_DTYPE))


def test_overflow_thresholds_and_fill_values():
    assert mx.overflow_threshold(np.float16) == pytest.approx(11.0898, abs=1e-3)
    assert mx.overflow_threshold(np.float32) == pytest.approx(88.7228, abs=1e-3)
    assert mx.overflow_threshold(np.float64) == pytest.approx(709.7827, abs=1e-3)
    assert mx.fill_values("float16") == {"−1e9": -np.inf, "−inf": -np.inf, "finfo(dtype).min": -65504.0,
                                         "finfo(dtype).min − 16": -np.inf}
    assert mx.fill_values("float32")["−1e9"] == -1e9


def fill_minus_1e9(scores, mask, axis=-1):
    x = np.where(mask, scores, -1e9)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def fill_minus_inf(scores, mask, axis=-1):
    x = np.where(mask, scores, -np.inf)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_a_minus_1e9_fill_shows_uniform_pink_rows_for_the_empty_sequence():
    explorer = mx.MaskingExplorer(ref.padding_mask, ref.causal_padding_mask, fill_minus_1e9, sync=True)
    np.testing.assert_allclose(explorer.view.weights[2], 1 / 8)
    assert np.abs(pixel(explorer, 2, 3, 3) - rgb(mx.LEAK)).max() <= 2
    assert "✗ the 8 fully masked rows are uniform (1/8 on every key, pink)" in explorer.summary.value
    assert "✗ 64 blocked entries get weight (pink)" in explorer.summary.value


def test_an_unguarded_minus_inf_fill_shows_red_nan_rows_and_the_warning():
    explorer = mx.MaskingExplorer(ref.padding_mask, ref.causal_padding_mask, fill_minus_inf, sync=True)
    assert np.isnan(explorer.view.weights[2]).all() and explorer.error is None
    assert np.abs(pixel(explorer, 2, 0, 0) - rgb(mx.NOT_FINITE)).max() <= 2
    assert "✗ the 8 fully masked rows are NaN (dark red)" in explorer.summary.value
    assert "NumPy warned: RuntimeWarning: invalid value" in explorer.summary.value
    explorer.length_sliders[2].value = 3  # no fully masked row left: nothing red, no warning
    assert np.isfinite(explorer.view.weights).all() and "✗" not in explorer.summary.value


def test_a_learner_error_is_one_message_and_a_fixed_definition_is_picked_up():
    namespace = {"np": np}
    exec("def masked_softmax(scores, mask, axis=-1):\n    raise NotImplementedError()", namespace)
    explorer = mx.MaskingExplorer(ref.padding_mask, ref.causal_padding_mask, namespace["masked_softmax"], sync=True)
    assert explorer.view is None and explorer.error == "masked_softmax raised NotImplementedError"
    assert "⚠ masked_softmax raised NotImplementedError" in explorer.summary.value
    assert explorer.figure.message.get_text() == "⚠ masked_softmax raised NotImplementedError"
    exec("def masked_softmax(scores, mask, axis=-1):\n    return np.where(mask, 0.5, 0.0)", namespace)  # re-run cell
    explorer.seed_slider.value = 3
    assert explorer.error is None and explorer.figure.message.get_text() == ""
    assert "do not sum to 1" in explorer.summary.value or "does not sum to 1" in explorer.summary.value


@pytest.mark.parametrize("functions, words", [
    ((lambda lengths, T: (np.arange(T) < np.asarray(lengths)[:, None])[:, :, None], ref.causal_padding_mask,
      ref.masked_softmax),
     "should return a bool array of shape (3, 1, 8); it returned a bool array of shape (3, 8, 1)"),
    ((ref.padding_mask, lambda lengths, T: np.ones((len(lengths), T, T)), ref.masked_softmax),
     "should return a bool array of shape (3, 8, 8); it returned a float64 array"),
    ((ref.padding_mask, ref.causal_padding_mask, lambda scores, mask: scores[0]),
     "returned shape (8, 8); expected the scores' shape (3, 8, 8)"),
    ((ref.padding_mask, ref.causal_padding_mask, lambda scores, mask: [scores]),
     "returned list; expected the scores' shape (3, 8, 8)"),
])
def test_wrong_shapes_and_types_are_explained(functions, words):
    causal = functions[0] is ref.padding_mask
    explorer = mx.MaskingExplorer(*functions, causal=causal, sync=True)
    assert explorer.view is None and words in explorer.error
    assert explorer.image.value  # the picture is still drawn (blank panels and the message)


def test_functions_that_modify_their_inputs_do_not_change_the_picture():
    def scribbles(scores, mask, axis=-1):
        result = ref.masked_softmax(scores, mask)
        scores[...] = 0.0
        return result

    explorer = mx.MaskingExplorer(ref.padding_mask, ref.causal_padding_mask, scribbles, sync=True)
    check_matches_reference(explorer)
    explorer.length_sliders[0].value = 4
    check_matches_reference(explorer)


def test_one_figure_and_one_image_are_reused(explorer):
    figure, image = explorer.figure.figure, explorer.image
    for value in (3, 4, 5, 6):
        explorer.seed_slider.value = value
    assert explorer.figure.figure is figure and explorer.image is image and explorer.redraws == 5


def test_controls_have_labels_and_tooltips(untouched_explorer):
    explorer = untouched_explorer
    controls = [explorer.T_slider, *explorer.length_sliders, explorer.causal_box, explorer.logit_slider,
                explorer.seed_slider]
    for control in controls:
        assert control.description and control.tooltip
    assert explorer.dtype_buttons.description == "dtype" and len(explorer.dtype_buttons.tooltips) == 3


def test_axes_say_query_and_key_position(untouched_explorer):
    explorer = untouched_explorer
    assert explorer.figure.heat_axes[0].get_ylabel() == "query position"
    assert all(ax.get_xlabel() == "key position" for ax in explorer.figure.heat_axes)


@pytest.mark.parametrize("kwargs", [{"T": 1}, {"T": 25}, {"lengths": (1, 2)}, {"lengths": (1, 2, 9)},
                                    {"dtype": "int8"}, {"logit_size": 5}])
def test_bad_initial_settings_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        mx.MaskingExplorer(*FUNCTIONS, sync=True, **kwargs)


def test_not_shown_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert mx.explore_masking(*FUNCTIONS) is None
    assert capsys.readouterr().out.strip() == "(the masking explorer is not shown while grading)"
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert isinstance(mx.explore_masking(*FUNCTIONS), mx.MaskingExplorer)


def test_sequences_are_numbered_0_to_2_as_the_batch_rows_of_the_tables(explorer):
    assert [s.description for s in explorer.length_sliders] == ["length 0", "length 1", "length 2"]
    assert [s.value for s in explorer.length_sliders] == [8, 5, 0]
    assert "sequence 0 (row 0 of the batch)" in explorer.length_sliders[0].tooltip
    assert [ax.get_title() for ax in explorer.figure.heat_axes] == ["sequence 0: length 8", "sequence 1: length 5",
                                                                    "sequence 2: length 0"]
    explorer.length_sliders[2].value = 3  # slider "length 2" is batch row 2: its mask gets 3 real keys
    assert explorer.view.mask[2, :, :3].any() and not explorer.view.mask[2, :, 3:].any()
    assert explorer.figure.heat_axes[2].get_title() == "sequence 2: length 3"


@pytest.mark.parametrize("name", list(plots.COLOUR_SCALES))
def test_colour_scale_colours_allowed_cells_and_keeps_blocked_ones_black(explorer, name):
    explorer.colour_dropdown.value = name
    check_matches_reference(explorer)
    assert explorer.figure.colour_bar_ax.get_ylabel() == plots.COLOUR_SCALES[name].label
    mask, _, weights = expected(explorer.settings)
    values = weights[1] / weights[1].max(axis=-1, keepdims=True) if name == "row-normalised" else weights[1]
    norm = LogNorm(1e-4, 1.0, clip=True) if name == "logarithmic" else Normalize(0.0, 1.0, clip=True)
    for row, col in [(7, 0), (4, 4), (6, 2), (3, 1)]:  # allowed keys of sequence 1 (length 5)
        assert mask[1, row, col]
        # viridis without its darkest fifth (left to blocked cells): 0 → viridis(0.2), 1 → viridis(1)
        want = rgb(colormaps[mx.COLORMAP](0.2 + 0.8 * norm(values[row, col])))
        assert np.abs(pixel(explorer, 1, row, col) - want).max() <= 3, (name, row, col)
    for row, col in [(2, 6), (7, 5), (0, 3)]:  # padding and future keys: black whatever the scale
        assert np.abs(pixel(explorer, 1, row, col) - rgb(mx.BLOCKED)).max() <= 2
