"""The positional-encoding explorer, driven headlessly: each control redraws exactly what the reference computes,
and a learner's broken function blanks only its panels, with a one-line message."""

import io

import numpy as np
import pytest
from matplotlib import colormaps
from PIL import Image

from attention_lab.core import explorer as explorer_module
from attention_lab.a03_positional import visual as px
from autograder.assignments.a03_positional import reference as ref
from autograder.grader.answers import namespace_with

FUNCTIONS = (ref.sinusoidal_positional_encoding, ref.dot_product_by_offset, ref.offset_rotation, ref.self_attention,
             ref.add_positions)


@pytest.fixture
def explorer():
    return px.PositionalExplorer(*FUNCTIONS, T=40, d_model=16, t=6, k=5, pair=2, sync=True)


@pytest.fixture(scope="module")
def untouched_explorer():
    """A new explorer as ``explorer`` builds it, shared by the tests that only read it (no control moves)."""
    return px.PositionalExplorer(*FUNCTIONS, T=40, d_model=16, t=6, k=5, pair=2, sync=True)


def expected_gaps(T, d_model, seed):
    x, W_q, W_k, W_v, perm = px.attention_problem(T, d_model, seed)
    out = lambda z: ref.self_attention(z, W_q, W_k, W_v)[0]  # noqa: E731
    plain = np.abs(out(x[perm]) - out(x)[perm]).max(axis=1)
    encoded = np.abs(out(ref.add_positions(x[perm])) - out(ref.add_positions(x))[perm]).max(axis=1)
    return plain, encoded


def check_matches_reference(explorer):
    s, f = explorer.settings, explorer.figure
    pe = ref.sinusoidal_positional_encoding(s.T, s.d_model)
    np.testing.assert_array_equal(explorer.view.pe, pe)
    np.testing.assert_array_equal(f.image.get_array(), pe)
    np.testing.assert_allclose(f.dot_line.get_ydata(), ref.dot_product_by_offset(pe, s.t), rtol=1e-12)
    np.testing.assert_allclose(f.zero_line.get_ydata(), ref.dot_product_by_offset(pe, 0), rtol=1e-12)
    learned = px.learned_encoding(s.T, s.d_model, s.seed)
    np.testing.assert_allclose(f.learned_line.get_ydata(), ref.dot_product_by_offset(learned, s.t), rtol=1e-12)
    columns = slice(2 * s.pair, 2 * s.pair + 2)
    np.testing.assert_allclose(f.points.get_offsets(), pe[:, columns])
    np.testing.assert_allclose(np.ravel(f.start_marker.get_data()), pe[s.t, columns])
    moved = (pe[s.t] @ ref.offset_rotation(s.k, s.d_model))[columns]
    np.testing.assert_allclose(np.ravel(f.moved_marker.get_data()), moved, atol=1e-12)
    if 0 <= s.t + s.k < s.T:
        np.testing.assert_allclose(np.ravel(f.target_marker.get_data()), pe[s.t + s.k, columns])
        np.testing.assert_allclose(moved, pe[s.t + s.k, columns], atol=1e-12)  # R_k lands on PE(t + k)
    plain, encoded = expected_gaps(s.T, s.d_model, s.seed)
    np.testing.assert_allclose(f.gap_plain_line.get_ydata(), np.maximum(plain, px.GAP_FLOOR))
    np.testing.assert_allclose(f.gap_positions_line.get_ydata(), encoded, rtol=1e-12)
    assert f"T = {s.T}, d_model = {s.d_model}" in explorer.summary.value
    assert f"pair {s.pair} turns by ω = {ref.frequencies(s.d_model)[s.pair]:.4g} rad per position" \
        in explorer.summary.value
    assert explorer.view.errors == [] and "⚠" not in explorer.summary.value


def pixel(explorer, rect, fx, fy):
    """Colour at fractions (fx across, fy down) of an axes rectangle, from the rendered PNG."""
    img = np.asarray(Image.open(io.BytesIO(explorer.image.value)).convert("RGB"))
    height, width = img.shape[:2]
    left, bottom, w, h = rect
    return img[int((1 - bottom - h + h * fy) * height), int((left + w * fx) * width)].astype(int)


def test_initial_view_matches_the_reference(untouched_explorer):
    explorer = untouched_explorer
    check_matches_reference(explorer)
    assert "the same curve as from t = 0" in explorer.summary.value


@pytest.mark.parametrize("control, value", [("T_slider", 200), ("T_slider", 9), ("d_slider", 64), ("d_slider", 2),
                                            ("t_slider", 30), ("k_slider", -11), ("k_slider", 0),
                                            ("pair_slider", 7), ("seed_slider", 42)])
def test_each_control_redraws_what_the_reference_computes(explorer, control, value):
    before, redraws = explorer.image.value, explorer.redraws
    getattr(explorer, control).value = value
    check_matches_reference(explorer)
    assert explorer.image.value != before
    assert explorer.redraws == redraws + 1  # one redraw per change, clamping included


def test_size_changes_keep_t_and_pair_inside_the_table(explorer):
    explorer.t_slider.value, explorer.pair_slider.value = 35, 7
    explorer.T_slider.value = 10
    explorer.d_slider.value = 6
    assert (explorer.t_slider.max, explorer.t_slider.value) == (9, 9)
    assert (explorer.pair_slider.max, explorer.pair_slider.value) == (2, 2)
    check_matches_reference(explorer)
    explorer.T_slider.value = 300
    assert explorer.t_slider.max == 299 and explorer.t_slider.value == 9


def test_rows_t_and_t_plus_k_are_marked_on_the_heatmap_while_inside(explorer):
    solid, dashed = explorer.figure.row_lines
    assert list(solid.get_ydata()) == [6, 6] and list(dashed.get_ydata()) == [11, 11]
    assert solid.get_visible() and dashed.get_visible()
    explorer.k_slider.value = 50  # t + k = 56 is beyond T = 40
    assert solid.get_visible() and not dashed.get_visible()
    assert len(explorer.figure.target_marker.get_data()[0]) == 0
    assert "PE(t) R_k − PE(t+k) is at most" not in explorer.summary.value  # no row of the table has a partner


def test_heatmap_pixels_show_the_encoding_colours(untouched_explorer):
    explorer = untouched_explorer
    cmap = colormaps[px.ENCODING_COLORMAP]
    # Row 0 is (0, 1, 0, 1, …): column 1 (cos 0 = 1) is the top colour, column 0 (sin 0 = 0) the middle one.
    T, d = 40, 16
    top = (np.array(cmap(1.0)[:3]) * 255).round()
    middle = (np.array(cmap(0.5)[:3]) * 255).round()
    assert np.abs(pixel(explorer, px.HEATMAP_RECT, 1.5 / d, 0.5 / T) - top).max() <= 3
    assert np.abs(pixel(explorer, px.HEATMAP_RECT, 0.5 / d, 0.5 / T) - middle).max() <= 3


def test_gap_is_rounding_level_without_positions_and_order_one_with_them(explorer):
    plain, encoded = explorer.view.gap_plain, explorer.view.gap_positions
    assert plain.max() < 1e-12 and encoded.max() > 0.1
    assert f"largest gap {plain.max():.1e} without positions, {encoded.max():.3f} with positions" \
        in explorer.summary.value
    explorer.shuffle.click()
    assert explorer.seed_slider.value == 1
    check_matches_reference(explorer)


def test_one_figure_and_one_image_are_reused(explorer):
    image, figure, canvas = explorer.image, explorer.figure.figure, explorer.figure.canvas
    for step in range(12):
        [explorer.t_slider, explorer.k_slider, explorer.pair_slider][step % 3].value = step % 5
    assert explorer.image is image and explorer.figure.figure is figure and explorer.figure.canvas is canvas
    assert len(figure.axes) == 5  # four panels and the colour bar


def test_static_parts_are_redrawn_only_when_the_table_size_changes(explorer, monkeypatch):
    layouts = []
    original = explorer.figure.layout
    monkeypatch.setattr(explorer.figure, "layout", lambda *a: layouts.append(a) or original(*a))
    explorer.t_slider.value = 3
    explorer.k_slider.value = -2
    explorer.seed_slider.value = 5
    assert layouts == []
    explorer.T_slider.value = 50
    assert layouts == [(50, 16)]


# ---------------------------------------------------------------- learners' broken functions
SOLUTIONS = {
    "sinusoidal_positional_encoding": "def sinusoidal_positional_encoding(T, d_model):\n"
                                      "    a = np.arange(T)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)\n"
                                      "    pe = np.zeros((T, d_model))\n"
                                      "    pe[:, 0::2], pe[:, 1::2] = np.sin(a), np.cos(a)\n"
                                      "    return pe",
    "dot_product_by_offset": "def dot_product_by_offset(pe, t):\n    return pe[t:] @ pe[t]",
    "offset_rotation": "def offset_rotation(k, d_model):\n"
                       "    a = k / 10000 ** (np.arange(0, d_model, 2) / d_model)\n"
                       "    R = np.zeros((d_model, d_model))\n"
                       "    for i, b in enumerate(a):\n"
                       "        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(b), -np.sin(b)],\n"
                       "                                               [np.sin(b), np.cos(b)]]\n"
                       "    return R",
    "softmax": "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
               "    return e / e.sum(axis, keepdims=True)",
    "self_attention": "def self_attention(x, W_q, W_k, W_v):\n"
                      "    s = (x @ W_q) @ (x @ W_k).T / np.sqrt(W_q.shape[1])\n"
                      "    w = softmax(s)\n    return w @ (x @ W_v), w",
    "add_positions": "def add_positions(x):\n    return x + sinusoidal_positional_encoding(*x.shape)",
}


def learner_explorer(**cells):
    namespace = namespace_with({**SOLUTIONS, **cells})
    functions = [namespace[name] for name in ("sinusoidal_positional_encoding", "dot_product_by_offset",
                                              "offset_rotation", "self_attention", "add_positions")]
    return px.PositionalExplorer(*functions, T=20, d_model=8, t=2, k=3, pair=1, sync=True), namespace


def test_learners_correct_functions_draw_what_the_reference_draws():
    explorer, _ = learner_explorer()
    assert explorer.view.errors == []
    reference = px.PositionalExplorer(*FUNCTIONS, T=20, d_model=8, t=2, k=3, pair=1, sync=True)
    for name in ("pe", "dots", "dots_from_zero", "learned_dots", "circle", "start", "moved", "gap_positions"):
        np.testing.assert_allclose(getattr(explorer.view, name), getattr(reference.view, name), atol=1e-12)


def test_an_unwritten_function_blanks_only_its_panel_and_a_fix_is_picked_up():
    explorer, namespace = learner_explorer(offset_rotation="def offset_rotation(k, d_model):\n"
                                                           "    raise NotImplementedError()")
    assert explorer.view.errors == ["offset_rotation raised NotImplementedError"]
    assert "⚠ offset_rotation raised NotImplementedError" in explorer.summary.value
    assert explorer.view.circle is None and len(explorer.figure.points.get_offsets()) == 0
    assert explorer.view.pe is not None and explorer.view.dots is not None and explorer.view.gap_plain is not None
    # The learner writes the rotation, flipped, and re-runs the cell: the next change uses it.
    exec("def offset_rotation(k, d_model):\n    return ref.offset_rotation(k, d_model).T", {**namespace, "ref": ref},
         namespace)
    namespace["offset_rotation"].__globals__["ref"] = ref
    explorer.k_slider.value = 4
    assert explorer.view.errors == []
    assert explorer.view.rotation_error > 0.1  # the transpose moves encodings back, so PE(t) R_k misses PE(t + k)
    assert not np.allclose(np.ravel(explorer.figure.moved_marker.get_data()),
                           np.ravel(explorer.figure.target_marker.get_data()))


def test_an_encoding_that_fails_blanks_every_panel_that_needs_it():
    explorer, _ = learner_explorer(sinusoidal_positional_encoding="def sinusoidal_positional_encoding(T, d_model):\n"
                                                                  "    raise NotImplementedError()")
    errors = explorer.view.errors
    assert errors[0] == "sinusoidal_positional_encoding raised NotImplementedError"
    assert errors[1] == "add_positions raised NotImplementedError"  # add_positions calls the encoding
    assert explorer.view.pe is None and explorer.view.dots is None and explorer.view.circle is None
    assert np.all(np.isnan(np.ma.getdata(explorer.figure.image.get_array())))
    assert len(explorer.figure.dot_line.get_xdata()) == 0 and len(explorer.figure.gap_plain_line.get_xdata()) == 0


@pytest.mark.parametrize("cell, message", [
    (("sinusoidal_positional_encoding", "def sinusoidal_positional_encoding(T, d_model):\n"
                                        "    return np.zeros((d_model, T))"),
     "sinusoidal_positional_encoding returned an encoding for T = 20, d_model = 8 of shape (8, 20); "
     "expected shape (20, 8)"),
    (("dot_product_by_offset", "def dot_product_by_offset(pe, t):\n    return pe[t:] @ pe[t] * np.nan"),
     "dot_product_by_offset returned 18 NaN or infinite value(s) in dot products for t = 2"),
    (("offset_rotation", "def offset_rotation(k, d_model):\n    return np.eye(d_model)[:, :2]"),
     "offset_rotation returned R_3 of shape (8, 2); expected shape (8, 8)"),
    (("self_attention", "def self_attention(x, W_q, W_k, W_v):\n    return x @ W_v"),
     "self_attention should return (output, weights); it returned ndarray"),
    (("add_positions", "def add_positions(x):\n    return np.concatenate([x, x], axis=1)"),
     "add_positions returned x + PE of shape (20, 16); expected shape (20, 8)"),
    (("dot_product_by_offset", "def dot_product_by_offset(pe, t):\n    return (pe[t:] @ pe[t]).astype(complex)"),
     "dot_product_by_offset returned dot products for t = 2 of dtype complex128; expected real numbers"),
])
def test_wrong_results_become_one_line_messages(cell, message):
    name, source = cell
    explorer, _ = learner_explorer(**{name: source})
    assert explorer.view.errors[0] == message
    if name != "sinusoidal_positional_encoding":  # a wrong table also breaks add_positions, which uses it
        assert len(explorer.view.errors) == 1
    assert f"⚠ {message}" in explorer.summary.value


def test_a_hanging_function_becomes_a_message(monkeypatch):
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.5)  # the visuals share its time limit
    explorer, _ = learner_explorer(dot_product_by_offset="def dot_product_by_offset(pe, t):\n    while True:\n"
                                                         "        pass")
    assert len(explorer.view.errors) == 1
    assert explorer.view.errors[0].startswith("dot_product_by_offset raised FunctionTimedOut: did not finish within")


def test_inputs_are_copied_so_a_function_that_modifies_them_changes_nothing_on_screen():
    explorer, _ = learner_explorer(dot_product_by_offset="def dot_product_by_offset(pe, t):\n"
                                                         "    out = pe[t:] @ pe[t]\n    pe[:] = 0\n    return out")
    np.testing.assert_allclose(explorer.view.pe, ref.sinusoidal_positional_encoding(20, 8), atol=1e-15)
    np.testing.assert_allclose(explorer.view.dots_from_zero, ref.dot_product_by_offset(explorer.view.pe, 0))


# ---------------------------------------------------------------- entry point, controls, static plots
def test_nothing_is_shown_while_grading(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert px.explore_positional_encoding(*FUNCTIONS) is None
    assert capsys.readouterr().out == "(the positional-encoding explorer is not shown while grading)\n"
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert isinstance(px.explore_positional_encoding(*FUNCTIONS, T=8, d_model=4, t=1, k=1, pair=0, sync=True),
                      px.PositionalExplorer)


@pytest.mark.parametrize("settings, words", [
    ({"T": 1}, "T must be between 2 and 512; received 1"),
    ({"d_model": 7}, "d_model must be an even number between 2 and 256; received 7"),
    ({"T": 10, "t": 10}, "t must be a position in [0, 9]; received 10"),
    ({"d_model": 8, "pair": 4}, "pair must be in [0, 3] (d_model / 2 pairs); received 4"),
    ({"k": 500}, "k must be between -128 and 128; received 500"),
])
def test_out_of_range_initial_values_are_refused(settings, words):
    with pytest.raises(ValueError) as error:
        px.PositionalExplorer(*FUNCTIONS, sync=True, **settings)
    assert str(error.value) == words


def test_controls_are_labelled_with_tooltips(untouched_explorer):
    explorer = untouched_explorer
    for control in (explorer.T_slider, explorer.d_slider, explorer.t_slider, explorer.k_slider, explorer.pair_slider,
                    explorer.seed_slider, explorer.shuffle):
        assert control.description and control.tooltip
    assert explorer.d_slider.step == 2


def test_static_plots_show_the_data_with_the_course_labels():
    pe = ref.sinusoidal_positional_encoding(12, 6)
    ax = px.plot_encoding(pe)
    np.testing.assert_array_equal(ax.images[0].get_array(), pe)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("dimension (even: sin, odd: cos)", "position")
    assert ax.images[0].get_clim() == (-1.0, 1.0)

    ax = px.plot_dot_products({"t = 0": ref.dot_product_by_offset(pe, 0), "t = 4": ref.dot_product_by_offset(pe, 4)})
    assert [line.get_label() for line in ax.lines[:2]] == ["t = 0", "t = 4"]
    np.testing.assert_allclose(ax.lines[1].get_ydata(), ref.dot_product_by_offset(pe, 4))

    moved = (pe[3] @ ref.offset_rotation(2, 6))[2:4]
    ax = px.plot_pair_circle(pe, 1, t=3, moved=moved)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), pe[:, 2:4])
    np.testing.assert_allclose(np.ravel(ax.lines[-1].get_data()), pe[5, 2:4], atol=1e-12)
    assert ax.get_xlabel() == "sin (column 2)"

    with pytest.raises(ValueError, match=r"pe must have shape \(T, d_model\); received shape \(12,\)"):
        px.plot_encoding(pe[:, 0])
    with pytest.raises(ValueError, match="pe must have shape \\(T, d_model\\) with a column pair 3"):
        px.plot_pair_circle(pe, 3)
    with pytest.raises(ValueError, match="curve 'bad' must be 1-D"):
        px.plot_dot_products({"bad": pe})


def test_the_gap_panel_is_reused_for_t_k_and_pair_and_recomputed_for_what_it_depends_on():
    explorer = px.PositionalExplorer(*FUNCTIONS, T=16, d_model=8, t=3, k=2, pair=1, sync=True)
    gaps = explorer.view.gap_plain
    explorer.t_slider.value, explorer.k_slider.value, explorer.pair_slider.value = 5, -1, 2
    assert explorer.view.gap_plain is gaps  # t, k and the pair do not change the shuffled-tokens panel
    explorer.seed_slider.value = 4
    assert explorer.view.gap_plain is not gaps
    fresh = px.PositionalExplorer(*FUNCTIONS, T=16, d_model=8, t=5, k=-1, pair=2, seed=4, sync=True)
    np.testing.assert_array_equal(explorer.view.gap_plain, fresh.view.gap_plain)
    np.testing.assert_array_equal(explorer.view.gap_positions, fresh.view.gap_positions)
