"""Colours that carry meaning stay apart in greyscale and under simulated colour-vision deficiency.

Measured on the drawn figures of every explorer and every static plot of the student package (tests/colour_contrast.py):
the entries of each legend (each curve against the others), the two ends of each colour bar, the masking explorer's
blocked cells against every colour an allowed cell can take, and its chosen dtype's bar against the others.
"""

import matplotlib
import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.colors import to_rgba

from attention_lab.a01_attention.visual import AttentionExplorer
from attention_lab.a02_multi_head.visual import MultiHeadExplorer
from attention_lab.a03_positional import visual as positional
from attention_lab.a04_masking import visual as mx
from attention_lab.a05_kv_cache.visual import CacheCostExplorer
from attention_lab.a06_gradients.visual import GradientExplorer
from attention_lab.a07_tiled_attention import memory as a07_memory
from attention_lab.a07_tiled_attention.visual import TileExplorer
from attention_lab.a08_modern_attention import alibi as a08_alibi
from attention_lab.a08_modern_attention import visual as a08_visual
from attention_lab.a09_tiny_gpt import visual as a09_visual
from attention_lab.a09_tiny_gpt.weights import load_weights as a09_weights
from attention_lab.core import plots
from autograder.assignments.a01_attention import reference as a01
from autograder.assignments.a02_multi_head import reference as a02
from autograder.assignments.a03_positional import reference as a03
from autograder.assignments.a04_masking import reference as a04
from autograder.assignments.a05_kv_cache import reference as a05
from autograder.assignments.a06_gradients import reference as a06
from autograder.assignments.a07_tiled_attention import reference as a07
from autograder.assignments.a08_modern_attention import reference as a08
from autograder.assignments.a09_tiny_gpt import reference as a09
from colour_contrast import MIN_DELTA_L, colour_bar_problems, legend_problems, smallest_difference, unique_colours

MASKING = (a04.padding_mask, a04.causal_padding_mask, a04.masked_softmax)

EXPLORERS = {
    "attention": lambda: AttentionExplorer(a01.scaled_dot_product_attention, a01.causal_mask, a01.attention_entropy,
                                           T=16, sync=True),
    "multi-head": lambda: MultiHeadExplorer(a02.multi_head_attention, a01.attention_entropy, T=12, sync=True),
    "positional": lambda: positional.PositionalExplorer(a03.sinusoidal_positional_encoding, a03.dot_product_by_offset,
                                                        a03.offset_rotation, a03.self_attention, a03.add_positions,
                                                        sync=True),
    "masking": lambda: mx.MaskingExplorer(*MASKING, T=8, lengths=(8, 5, 0), sync=True),
    "kv cache": lambda: CacheCostExplorer(a05.attention_cost_per_token, T=64, d_model=128, d_head=16, sync=True),
    "gradients": lambda: GradientExplorer(a06.softmax_jacobian, a06.softmax_backward, T=8, d_head=16, sync=True),
    "tiles": lambda: TileExplorer(a07.tile_schedule, T_q=10, T_k=10, block_q=4, block_k=3, sync=True),
    "rope": lambda: a08_visual.RopeExplorer(a08.apply_rope, T=12, d_head=8, sync=True),
    "cache memory": lambda: a08_visual.CacheMemoryExplorer(a08.kv_cache_bytes, log_scale=True, sync=True),
    "alibi": lambda: a08_alibi.AlibiExplorer(a08.alibi_slopes, n_heads=4, T=8, row=5, sync=True),
    "tiny gpt heads": lambda: a09_visual.HeadsExplorer(a09.model_forward, *a09_weights(), colour_scale="logarithmic",
                                                       sync=True),
}


def explorer_figure(explorer):
    """(matplotlib Figure, extra mappables): the explorers' weight colour bars are not on an image's Axes."""
    figure = explorer.figure
    colour_bar = getattr(figure, "colour_bar", None)
    return figure.figure, [colour_bar.mappable] if colour_bar is not None else []


def static_figures():
    """Each static plot of the notebooks, drawn the way the notebooks call it."""
    rng = np.random.default_rng(0)
    weights = a01.scaled_dot_product_attention(*(rng.normal(size=(8, 4)) for _ in range(3)), mask=a01.causal_mask(8))[1]
    ax_weights = plots.plot_attention_weights(weights)
    ax_entropy = plots.plot_row_entropy(a01.attention_entropy(weights), causal=True, label="scale=True")
    plots.plot_row_entropy(a01.attention_entropy(weights) / 2, causal=True, ax=ax_entropy, label="scale=False",
                           show_ceiling=False)
    pe = a03.sinusoidal_positional_encoding(40, 16)
    ax_encoding = positional.plot_encoding(pe)
    ax_dots = positional.plot_dot_products({f"t = {t}": a03.dot_product_by_offset(pe, t)[:20] for t in (0, 10, 20)}
                                           | {"random table": rng.normal(size=20)})
    ax_circle = positional.plot_pair_circle(pe, 1, t=5, moved=pe[7, 2:4])
    return {"attention weights": ax_weights.figure, "row entropy, two curves": ax_entropy.figure,
            "positional encoding": ax_encoding.figure, "dot products, four curves": ax_dots.figure,
            "pair circle": ax_circle.figure, "memory against T": memory_plot()[0]}


def memory_plot():
    """(figure, description) of assignment 7's memory plot, as plot_memory hands them to plots.show_figure."""
    shown, show = [], plots.show_figure
    plots.show_figure = lambda figure, description: shown.append((figure, description))
    try:
        a07_memory.plot_memory(a07.tiled_attention, T_values=(256, 512), block=128)
    finally:
        plots.show_figure = show
    (figure_and_description,) = shown
    return figure_and_description


@pytest.fixture(scope="module")
def explorers():
    return {name: make() for name, make in EXPLORERS.items()}


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_legend_entry_of_every_explorer_differs_from_the_others_in_lightness(explorers, name):
    figure, _ = explorer_figure(explorers[name])
    assert figure.legends or any(ax.get_legend() for ax in figure.axes), "the explorer has a legend to check"
    assert legend_problems(figure) == []


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_colour_bar_of_every_explorer_has_ends_apart_in_lightness(explorers, name):
    figure, extra = explorer_figure(explorers[name])
    assert colour_bar_problems(figure, extra) == []


def test_every_static_plot_keeps_its_curves_and_colour_bar_ends_apart_in_lightness():
    figures = static_figures()
    for name, figure in figures.items():
        figure.canvas.draw()
        assert legend_problems(figure) == [], name
        assert colour_bar_problems(figure) == [], name


def blocked_and_allowed(explorer, b):
    """(colours of blocked zero-weight cells, every colour an allowed cell can take) of sequence b, as drawn."""
    rgba = explorer.figure.images[b].get_array()
    view = explorer.view
    blocked = ~view.mask[b] & (view.weights[b] == 0)
    colour_bar = explorer.figure.colour_bar
    every_allowed = colour_bar.cmap(np.linspace(0.0, 1.0, 256))  # the colour bar's whole range …
    return unique_colours(rgba[blocked]), np.vstack([every_allowed[:, :3], unique_colours(rgba[view.mask[b]])])


@pytest.mark.parametrize("scale", plots.COLOUR_SCALES)
def test_masked_cells_differ_from_every_allowed_weight_in_lightness(explorers, scale):
    explorer = explorers["masking"]
    explorer.colour_dropdown.value = scale
    try:
        blocked, allowed = blocked_and_allowed(explorer, 1)  # sequence 1 (length 5 of 8) has both
        assert len(blocked) == 1 and len(allowed) > 2
        delta, vision = smallest_difference(blocked, allowed)
        assert delta >= MIN_DELTA_L, f"blocked vs allowed ΔL* {delta:.1f} ({vision})"
    finally:
        explorer.colour_dropdown.value = plots.DEFAULT_COLOUR_SCALE


def test_the_masking_measure_rejects_the_grey_on_viridis_of_before(monkeypatch):
    """Light grey blocked cells on full viridis (the masking explorer until now) fail the measure: ΔL* < 4."""
    monkeypatch.setattr(mx, "BLOCKED", to_rgba("0.86"))
    monkeypatch.setattr(mx, "ALLOWED_COLORMAP", colormaps["viridis"])
    explorer = mx.MaskingExplorer(*MASKING, T=8, lengths=(8, 5, 0), sync=True)
    blocked, allowed = blocked_and_allowed(explorer, 1)
    assert smallest_difference(blocked, allowed)[0] < 4


def test_the_legend_measure_rejects_two_curves_of_equal_lightness():
    """Okabe–Ito blue and vermillion (the curves of before) are 8 apart in L*: the legend measure names the pair."""
    ax = matplotlib.figure.Figure().add_subplot()
    ax.plot([0, 1], color="#0072B2", label="scaled")
    ax.plot([1, 0], color="#D55E00", label="unscaled", linestyle="--")
    ax.legend()
    assert [p.split(":")[0] for p in legend_problems(ax.figure)] == ["'scaled' and 'unscaled'"]


def test_the_colour_bar_measure_rejects_a_diverging_map():
    ax = matplotlib.figure.Figure().add_subplot()
    image = ax.imshow(np.array([[-1.0, 1.0]]), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.figure.colorbar(image)
    assert len(colour_bar_problems(ax.figure)) == 1


def test_the_chosen_dtype_bar_differs_from_the_others_in_lightness(explorers):
    bars = explorers["masking"].figure.bars
    chosen = [bar.get_facecolor() for bar, name in zip(bars, mx.DTYPES) if name == explorers["masking"].settings.dtype]
    others = [bar.get_facecolor() for bar, name in zip(bars, mx.DTYPES) if name != explorers["masking"].settings.dtype]
    assert smallest_difference(chosen, others)[0] >= MIN_DELTA_L
