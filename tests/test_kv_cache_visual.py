"""The KV-cache cost plot, driven headlessly: each control redraws exactly what the cost model says."""

import asyncio
import io

import numpy as np
import pytest
from PIL import Image

from attention_lab.a05_kv_cache import visual as kc
from attention_lab.core import explorer as explorer_module
from autograder.assignments.a05_kv_cache.reference import attention_cost_per_token as reference_cost


@pytest.fixture
def plot():
    return kc.CacheCostExplorer(reference_cost, T=64, d_model=128, d_head=16, sync=True)


def expected(T, d_model, d_head):
    cached = np.array([reference_cost(t, d_model, d_head, True) for t in range(1, T + 1)], dtype=float)
    recomputed = np.array([reference_cost(t, d_model, d_head, False) for t in range(1, T + 1)], dtype=float)
    return cached, recomputed


def check_matches_the_cost_model(plot):
    s = plot.settings
    cached, recomputed = expected(s.T, s.d_model, s.d_head)
    positions = np.arange(1, s.T + 1)
    for key, (want_cached, want_recomputed) in {"per_token": (cached, recomputed),
                                                "total": (np.cumsum(cached), np.cumsum(recomputed))}.items():
        cached_line, recomputed_line = plot.figure.lines[key]
        np.testing.assert_array_equal(cached_line.get_xdata(), positions)
        np.testing.assert_array_equal(cached_line.get_ydata(), want_cached)
        np.testing.assert_array_equal(recomputed_line.get_xdata(), positions)
        np.testing.assert_array_equal(recomputed_line.get_ydata(), want_recomputed)
    assert plot.figure.per_token_ax.get_xlim() == (1, s.T)
    assert f"token {s.T} costs {kc.readable(cached[-1])} multiply-adds with the cache" in plot.summary.value
    assert f"and {kc.readable(recomputed[-1])} without" in plot.summary.value
    assert f"all {s.T} tokens cost {kc.readable(cached.sum())} with the cache" in plot.summary.value
    assert f"({recomputed.sum() / cached.sum():.3g}× the work)" in plot.summary.value


def pixels(plot) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(plot.image.value)).convert("RGB")).astype(int)


def count_colour(image: np.ndarray, hex_colour: str, tolerance: int = 40) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(image - rgb).max(axis=-1) <= tolerance).sum())


def test_initial_view_draws_the_cost_model(plot):
    check_matches_the_cost_model(plot)
    assert plot.error is None and plot.redraws == 1
    image = pixels(plot)
    assert image.shape[:2] == (kc.FIGURE_SIZE[1] * kc.DPI, kc.FIGURE_SIZE[0] * kc.DPI)
    assert count_colour(image, kc.CACHED_STYLE["color"]) > 200  # both curves are on the picture
    assert count_colour(image, kc.RECOMPUTE_STYLE["color"]) > 200


@pytest.mark.parametrize("control, value", [("T_slider", 8192), ("T_slider", 16), ("d_model_slider", 4096),
                                            ("d_head_slider", 256), ("d_head_slider", 8)])
def test_each_control_redraws_what_the_cost_model_says(plot, control, value):
    before = plot.image.value
    getattr(plot, control).value = value
    check_matches_the_cost_model(plot)
    assert plot.image.value != before


def test_log_axes_switch_on_both_panels_and_back(plot):
    for ax in (plot.figure.per_token_ax, plot.figure.total_ax):
        assert ax.get_xscale() == ax.get_yscale() == "log"
    before = plot.image.value
    plot.log_box.value = False
    for ax in (plot.figure.per_token_ax, plot.figure.total_ax):
        assert ax.get_xscale() == ax.get_yscale() == "linear"
        assert ax.get_ylim()[0] == 0
    assert plot.image.value != before
    check_matches_the_cost_model(plot)


def test_recomputing_overtakes_the_cache_as_T_grows(plot):
    """The numbers the reader sees: equal at t = 1, then linear against quadratic per token."""
    plot.T_slider.value = 1024
    view = plot.view
    assert view.cached[0] == view.recomputed[0]
    assert np.all(np.diff(view.cached) == 2 * 16)
    assert np.all(np.diff(view.recomputed, 2) == 4 * 16)
    ratio = view.recomputed[-1] / view.cached[-1]
    assert ratio > 1000
    assert f"({ratio:.3g}× the work)" in plot.summary.value


def test_readable_counts():
    assert kc.readable(950) == "950"
    assert kc.readable(12_345) == "12.3 thousand"
    assert kc.readable(4_560_000) == "4.56 million"
    assert kc.readable(7.8e9) == "7.8 billion"
    assert kc.readable(3.2e12) == "3.2 trillion"


def learner_namespace(source: str) -> dict:
    namespace = {"np": np, "__name__": "__main__"}
    exec(source, namespace)
    return namespace


def test_a_fixed_cell_is_picked_up_at_the_next_change():
    namespace = learner_namespace("def attention_cost_per_token(t, d_model, d_head, cached):\n"
                                  "    raise NotImplementedError()")
    plot = kc.CacheCostExplorer(namespace["attention_cost_per_token"], T=32, d_model=64, d_head=8, sync=True)
    assert plot.view is None
    assert plot.error == "attention_cost_per_token raised NotImplementedError"
    assert "⚠ attention_cost_per_token raised NotImplementedError" in plot.summary.value
    for key in ("per_token", "total"):
        assert all(len(line.get_xdata()) == 0 for line in plot.figure.lines[key])
    exec("def attention_cost_per_token(t, d_model, d_head, cached):\n"
         "    n = 1 if cached else t\n"
         "    return 3 * n * d_model * d_head + 2 * n * t * d_head", namespace)
    plot.d_head_slider.value = 16
    assert plot.error is None
    check_matches_the_cost_model(plot)


@pytest.mark.parametrize("body, message", [
    ("return float('nan')", "attention_cost_per_token(1, 64, 8, cached=True) returned nan; a count of multiply-adds "
                            "is a finite number ≥ 0"),
    ("return -5", "attention_cost_per_token(1, 64, 8, cached=True) returned -5"),
    ("return np.ones(3)", "attention_cost_per_token(1, 64, 8, cached=True) returned ndarray array([1., 1., 1.]); "
                          "expected a number of multiply-adds"),
    ("return None", "returned NoneType None; expected a number of multiply-adds"),
    ("return True", "returned bool True; expected a number of multiply-adds"),
    ("return 1 if cached else 'many'", "attention_cost_per_token(1, 64, 8, cached=False) returned str 'many'"),
    ("raise ValueError('t must be positive')", "attention_cost_per_token raised ValueError: t must be positive"),
])
def test_bad_results_are_one_clear_message(body, message):
    namespace = learner_namespace(f"def attention_cost_per_token(t, d_model, d_head, cached):\n    {body}")
    plot = kc.CacheCostExplorer(namespace["attention_cost_per_token"], T=32, d_model=64, d_head=8, sync=True)
    assert plot.view is None
    assert message in plot.error
    assert plot.summary.value.startswith("<span style='color:#B00020'>⚠ ")
    assert "\n" not in plot.error


def test_a_hanging_cost_model_is_stopped(monkeypatch):
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.3)  # the visuals share its time limit
    namespace = learner_namespace("def attention_cost_per_token(t, d_model, d_head, cached):\n"
                                  "    while True:\n        pass")
    plot = kc.CacheCostExplorer(namespace["attention_cost_per_token"], T=16, d_model=64, d_head=8, sync=True)
    assert plot.error.startswith("attention_cost_per_token raised FunctionTimedOut: did not finish within 0.3 s")


def test_numpy_integers_and_floats_are_counts():
    namespace = learner_namespace("def attention_cost_per_token(t, d_model, d_head, cached):\n"
                                  "    n = 1 if cached else t\n"
                                  "    return np.float32(3 * n * d_model * d_head) + np.int64(2 * n * t * d_head)")
    plot = kc.CacheCostExplorer(namespace["attention_cost_per_token"], T=32, d_model=64, d_head=8, sync=True)
    assert plot.error is None
    check_matches_the_cost_model(plot)


def test_bad_initial_settings_raise_value_error():
    with pytest.raises(ValueError, match=r"T must be one of \(16, 32,"):
        kc.CacheCostExplorer(reference_cost, T=100)
    with pytest.raises(ValueError, match="d_model must be one of"):
        kc.CacheCostExplorer(reference_cost, d_model=100)
    with pytest.raises(ValueError, match="d_head must be one of"):
        kc.CacheCostExplorer(reference_cost, d_head=100)


def test_not_shown_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert kc.explore_cache_cost(reference_cost) is None
    assert capsys.readouterr().out == "(the cost plot is not shown while grading)\n"
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert isinstance(kc.explore_cache_cost(reference_cost, T=16), kc.CacheCostExplorer)


def test_changes_arriving_before_a_pending_redraw_are_merged():
    async def scenario():
        plot = kc.CacheCostExplorer(reference_cost, T=16, d_model=64, d_head=8)
        start = plot.redraws
        for T in kc.T_OPTIONS[1:7]:  # a burst of changes, as when a slider is dragged
            plot.T_slider.value = T
        plot.d_head_slider.value = 32
        assert plot.redraws == start  # nothing is drawn while the burst arrives
        await plot.drawn()  # the one pending redraw has run
        return plot, plot.redraws - start

    plot, redraws = asyncio.run(scenario())
    assert redraws == 1
    check_matches_the_cost_model(plot)


def test_one_figure_and_one_image_are_reused(plot):
    figure, image = plot.figure.figure, plot.image
    for T in kc.T_OPTIONS[:5]:
        plot.T_slider.value = T
    assert plot.figure.figure is figure and plot.image is image and plot.redraws == 1 + 5


def test_controls_have_labels_and_tooltips_and_axes_are_labelled(plot):
    for control in (plot.T_slider, plot.d_model_slider, plot.d_head_slider, plot.log_box):
        assert control.description and control.tooltip
    assert plot.figure.per_token_ax.get_xlabel() == plot.figure.total_ax.get_xlabel() == "token position t"
    assert "multiply-adds" in plot.figure.per_token_ax.get_ylabel()
    assert "multiply-adds" in plot.figure.total_ax.get_ylabel()
    labels = [text.get_text() for text in plot.figure.per_token_ax.get_legend().get_texts()]
    assert labels == [kc.CACHED_STYLE["label"], kc.RECOMPUTE_STYLE["label"]]
