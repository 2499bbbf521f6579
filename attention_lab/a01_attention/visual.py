"""The attention explorer: sliders for T and d_head that redraw heatmaps and entropy curves.

``explore_attention(scaled_dot_product_attention, causal_mask, attention_entropy)``
shows, for random queries and keys q, k ~ N(0, I):

* the attention weights as a heatmap (rows = query position, columns = key
  position, colour-blind-safe ``viridis``) on the chosen colour scale:
  logarithmic from 10⁻⁴ to 1 by default, so that at T = 512, where every
  allowed weight is about 1/T, the causal triangle stays visible; linear 0…1;
  or each row divided by its largest weight;
* the entropy of each query row against its position, with the ceiling
  ln(i + 1) for causal rows and ln T otherwise;
* the mean row entropy against d_head for scaled (÷√d), unscaled and ÷d
  attention on a log axis, with the current d_head marked and the uniform
  ceiling those means can reach (ln T, or under the causal mask the mean of
  ln(i + 1) over the rows used) as a labelled horizontal line;
* one line of text with the largest weight (outside row 0 under the causal
  mask: row 0 has one allowed key, so its weight is always 1), the mean
  entropy in nats and whether every weight above the diagonal is zero.

It runs on whatever functions it is given — the learner's own in an
assignment, the reference in the self-study notebooks — and looks each one up
again by name before every redraw, so re-running a fixed solution cell is
picked up. Errors from those functions are shown as one message.

Speed: the inputs are drawn once per seed at the largest size and sliced;
one Agg figure is kept; static parts (axes, labels, colour bar) are drawn once
per (T, colour scale) and restored from a cached background, and only the changed artists are
drawn on top (blitting) before the canvas is encoded once into an
``ipywidgets.Image``. Changes that arrive while a redraw is pending are merged
into that redraw instead of queueing stale ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.ticker import MaxNLocator

from attention_lab.core.explorer import (BACKGROUNDS_KEPT, DPI, TITLE_Y,
                                         ExplorerError, ExplorerFigure, HeatmapExplorer, HeatmapSettings,
                                         call_for_visual, check_settings, control, function_name,
                                         largest_weight_text, latest, unless_grading)
from attention_lab.core.plots import (COLORMAP, CURVE_COLOURS, DEFAULT_COLOUR_SCALE, REFERENCE_COLOUR,
                                      colour_scale_named)

T_MAX = 512
D_HEAD_OPTIONS = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512)  # ≈ 2^(k/2)
CURVE_D_HEADS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # where the entropy-vs-d_head curves are computed
CURVE_QUERIES = 64  # rows used for the entropy-vs-d_head curves (evenly spaced over the sequence)
FIGURE_SIZE = (12.0, 3.6)  # inches at DPI dots per inch
# Axes rectangles in figure fractions (left, bottom, width, height). Fixed, so that tests can locate
# the heatmap's pixels in the rendered image.
HEATMAP_RECT = (0.06, 0.15, 0.225, 0.72)
COLORBAR_RECT = (0.295, 0.15, 0.01, 0.72)
ENTROPY_RECT = (0.43, 0.15, 0.235, 0.72)
CURVE_RECT = (0.75, 0.15, 0.235, 0.72)


@dataclass(frozen=True)
class Settings(HeatmapSettings):
    """One state of the controls."""

    T: int
    d_head: int
    scale: bool
    causal: bool


@dataclass
class View:
    """Everything drawn for one :class:`Settings`.

    Attributes
    ----------
    weights : ndarray, shape (T, T)
    entropy : ndarray, shape (T,), nats
    ceiling : ndarray, shape (T,), nats — ln(i+1) (causal) or ln T
    summary : str
    """

    weights: np.ndarray
    entropy: np.ndarray
    ceiling: np.ndarray
    summary: str


def draw_inputs(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V of shape (T_MAX, max d_head), entries ~ N(0, 1), from a local generator seeded with ``seed``.

    Every view slices these, so the picture changes only when a control changes.
    """
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((T_MAX, D_HEAD_OPTIONS[-1])) for _ in range(3))


def _attend(attention_fn, Q, K, V, mask, scale) -> np.ndarray:
    result = call_for_visual(attention_fn, Q, K, V, mask=mask, scale=scale)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ExplorerError(f"{function_name(attention_fn)} should return (output, weights); it returned "
                            f"{type(result).__name__}")
    weights = result[1]
    expected = (Q.shape[0], K.shape[0])
    if not isinstance(weights, np.ndarray) or weights.shape != expected:
        got = weights.shape if isinstance(weights, np.ndarray) else type(weights).__name__
        raise ExplorerError(f"{function_name(attention_fn)} returned weights of shape {got}; expected (T, T) = {expected}")
    if weights.dtype.kind not in "fiub":
        raise ExplorerError(f"{function_name(attention_fn)} returned weights of dtype {weights.dtype}; expected real numbers")
    bad = int(np.count_nonzero(~np.isfinite(weights)))
    if bad:
        raise ExplorerError(f"{function_name(attention_fn)} returned {bad} NaN or infinite weight(s) (rows "
                            f"{sorted(set(np.argwhere(~np.isfinite(weights))[:, 0].tolist()))[:5]}…): a row whose "
                            "keys are all blocked gives 0/0 — does the mask allow the diagonal?")
    return weights.astype(float, copy=False)


def _mask(mask_fn, T: int, causal: bool):
    if not causal:
        return None
    mask = call_for_visual(mask_fn, T)
    if not isinstance(mask, np.ndarray) or mask.shape != (T, T) or mask.dtype != np.bool_:
        got = f"{mask.dtype} array of shape {mask.shape}" if isinstance(mask, np.ndarray) else type(mask).__name__
        raise ExplorerError(f"{function_name(mask_fn)}({T}) should be a bool array of shape ({T}, {T}); got {got}")
    return mask


def _entropy(entropy_fn, weights) -> np.ndarray:
    entropy = call_for_visual(entropy_fn, weights)
    if not isinstance(entropy, np.ndarray) or entropy.dtype.kind not in "fiu":
        got = f"dtype {entropy.dtype}" if isinstance(entropy, np.ndarray) else type(entropy).__name__
        raise ExplorerError(f"{function_name(entropy_fn)} should return a real-valued array; it returned {got}")
    if entropy.shape != weights.shape[:-1]:
        raise ExplorerError(f"{function_name(entropy_fn)} returned shape {entropy.shape}; expected {weights.shape[:-1]}")
    bad = int(np.count_nonzero(~np.isfinite(entropy)))
    if bad:
        raise ExplorerError(f"{function_name(entropy_fn)} returned NaN or infinity for {bad} row(s): 0 · log 0 must "
                            "count as 0 (0 * np.log(0) is NaN in NumPy)")
    return entropy.astype(float, copy=False)


def compute_view(attention_fn, mask_fn, entropy_fn, settings: Settings, inputs) -> View:
    """Weights, row entropies, ceilings and the summary line for one setting of the controls.

    Raises
    ------
    ExplorerError
        If one of the functions raises or returns the wrong shape.
    """
    T, d = settings.T, settings.d_head
    Q, K, V = (array[:T, :d] for array in inputs)
    weights = _attend(attention_fn, Q, K, V, _mask(mask_fn, T, settings.causal), settings.scale)
    entropy = _entropy(entropy_fn, weights)
    positions = np.arange(T)
    ceiling = np.log(positions + 1.0) if settings.causal else np.full(T, math.log(T))
    leaks = int(np.count_nonzero(np.triu(weights, 1)))
    summary = (f"T = {T}, d_head = {d}, {'scaled by √d_head' if settings.scale else 'unscaled'}, "
               f"{'causal mask' if settings.causal else 'no mask'}: {largest_weight_text(weights, settings.causal)}"
               f" · mean row entropy {entropy.mean():.2f} nats "
               f"(uniform ceiling {ceiling.mean():.2f}) · "
               + ("every weight above the diagonal is zero" if leaks == 0
                  else f"{leaks} weight{'s' if leaks != 1 else ''} above the diagonal "
                       f"{'are' if leaks != 1 else 'is'} not zero"))
    return View(weights, entropy, ceiling, summary)


def curve_rows(T: int) -> np.ndarray:
    """The query rows of the entropy-vs-d_head curves: up to :data:`CURVE_QUERIES` evenly spaced rows of 0 … T − 1.

    Parameters
    ----------
    T : int
        The explorer's number of query positions (the ``T`` slider), ≥ 1.

    Returns
    -------
    numpy.ndarray of int, shape (min(T, CURVE_QUERIES),)
        Increasing row indices, first 0 and last T − 1.
    """
    return np.unique(np.linspace(0, T - 1, min(T, CURVE_QUERIES)).round().astype(int))


def curve_ceiling(T: int, causal: bool) -> float:
    """The uniform ceiling of the entropy-vs-d_head curves, in nats: the largest mean row entropy they can reach.

    Without a mask every row may spread over T keys: ln T. Under the causal mask row i spreads over at most
    i + 1 keys, so the ceiling is the mean of ln(i + 1) over :func:`curve_rows`. A curve at the ceiling means
    uniform weights: attention that ignores the scores (the ÷d curve at large d_head).

    Parameters
    ----------
    T : int
        Sequence length, ≥ 1.
    causal : bool
        Whether the causal mask is applied.

    Returns
    -------
    float
        Nats.
    """
    return float(np.mean(np.log(curve_rows(T) + 1.0))) if causal else math.log(T)


def curve_ceiling_label(T: int, causal: bool) -> str:
    """The label of the scaling panel's ceiling line: which ceiling and its value in nats.

    Parameters
    ----------
    T : int
    causal : bool

    Returns
    -------
    str
        ``"uniform ceiling: ln T = 3.47 nats"``, or under the causal mask
        ``"uniform ceiling: mean ln(i+1) = 2.63 nats"`` (:func:`curve_ceiling`).
    """
    value = curve_ceiling(T, causal)
    return (f"uniform ceiling: mean ln(i+1) = {value:.2f} nats" if causal else
            f"uniform ceiling: ln T = {value:.2f} nats")


def entropy_curves(attention_fn, mask_fn, entropy_fn, T: int, causal: bool, inputs) -> dict[str, np.ndarray]:
    """Mean row entropy (nats) against each d_head in :data:`CURVE_D_HEADS`, three ways of scaling.

    Uses up to :data:`CURVE_QUERIES` evenly spaced query rows against all T keys. Each scaling is the attention
    function with ``scale=True`` on other queries: "scaled (÷√d)" on Q, "unscaled" on ``Q · √d`` and "÷d" on
    ``Q / √d``, all three stacked in one call per d_head.

    Returns
    -------
    dict
        ``"scaled (÷√d)"``, ``"unscaled"``, ``"÷d"`` → array of shape (len(CURVE_D_HEADS),).
    """
    rows = curve_rows(T)
    mask = _mask(mask_fn, T, causal)
    n = len(rows)
    # The three scalings in one call per d_head, their queries stacked: with scale=True the function divides the
    # scores by √d, so Q gives "scaled", Q·√d gives "unscaled" and Q/√d gives "÷d" (a third of the calls, copies
    # and checks of one call per scaling: at T = 512 they cost more than the products themselves).
    mask = None if mask is None else np.tile(mask[rows], (3, 1))
    curves = {"scaled (÷√d)": [], "unscaled": [], "÷d": []}
    for d in CURVE_D_HEADS:
        Q, K, V = inputs[0][rows, :d], inputs[1][:T, :d], inputs[2][:T, :d]
        root = math.sqrt(d)
        entropy = _entropy(entropy_fn, _attend(attention_fn, np.concatenate([Q, Q * root, Q / root]), K, V, mask, True))
        for index, name in enumerate(curves):
            curves[name].append(float(np.mean(entropy[index * n:(index + 1) * n])))
    return {name: np.array(values) for name, values in curves.items()}


class AttentionFigure(ExplorerFigure):
    """The three panels, redrawn by blitting.

    Static parts are drawn by :meth:`layout` (once per T and colour scale); :meth:`render`
    restores them and draws only the animated artists, then encodes PNG bytes.
    """

    def __init__(self):
        super().__init__(FIGURE_SIZE, backgrounds_kept=BACKGROUNDS_KEPT)
        self.heat_ax = self.figure.add_axes(HEATMAP_RECT)
        self.image = self.heat_ax.imshow(np.zeros((2, 2)), cmap=colormaps[COLORMAP], interpolation="nearest",
                                         aspect="auto", animated=True)
        self.heat_ax.set_xlabel("key position")
        self.heat_ax.set_ylabel("query position")
        self.heat_ax.set_title("attention weights", fontsize=10, y=TITLE_Y)
        self.add_weight_colour_bar(COLORBAR_RECT)

        self.entropy_ax = self.figure.add_axes(ENTROPY_RECT)
        (self.ceiling_line,) = self.entropy_ax.plot([], [], "--", color=REFERENCE_COLOUR, animated=True,
                                                    label="uniform ceiling")
        (self.entropy_line,) = self.entropy_ax.plot([], [], color=CURVE_COLOURS[0], lw=1.5, animated=True,
                                                    label="entropy of the row")
        self.entropy_ax.set_xlabel("query position")
        self.entropy_ax.set_ylabel("entropy (nats)")
        self.entropy_ax.set_title("entropy per query row", fontsize=10, y=TITLE_Y)
        # Legends sit in a band above every value (entropies never exceed ln T), so no line crosses them
        # and they can stay in the static background.
        self.entropy_legend = self.entropy_ax.legend(loc="upper center", ncol=2, fontsize="small")

        self.curve_ax = self.figure.add_axes(CURVE_RECT)
        styles = {"scaled (÷√d)": (CURVE_COLOURS[0], "-"), "unscaled": (CURVE_COLOURS[1], "--"), "÷d": (CURVE_COLOURS[2], ":")}
        self.curve_lines = {name: self.curve_ax.plot([], [], linestyle=ls, color=color, lw=1.8, marker=".",
                                                     animated=True, label=name)[0]
                            for name, (color, ls) in styles.items()}
        (self.marker,) = self.curve_ax.plot([], [], color="0.2", lw=1, animated=True)  # the current d_head
        # The ceiling the mean entropies can reach: the ÷d curve climbing to it means uniform weights.
        self.curve_ceiling = self.curve_ax.axhline(math.log(2), color="0.35", lw=1, linestyle="--",
                                                   animated=True)
        self.curve_ceiling_text = self.curve_ax.text(0.02, 0.0, "", transform=self.curve_ax.get_yaxis_transform(),
                                                     ha="left", va="bottom", fontsize="small", color="0.25",
                                                     animated=True)
        self.curve_ax.set_xscale("log", base=2)
        self.curve_ax.set_xlim(D_HEAD_OPTIONS[0] * 0.9, D_HEAD_OPTIONS[-1] * 1.1)
        self.curve_ax.set_xlabel("d_head (log scale)")
        self.curve_ax.set_ylabel("mean row entropy (nats)")
        self.curve_ax.set_title("scaling vs saturation", fontsize=10, y=TITLE_Y)
        self.curve_legend = self.curve_ax.legend(loc="upper center", ncol=3, fontsize="small", columnspacing=1.0,
                                                 handlelength=1.6)
        for axis in (self.heat_ax.xaxis, self.heat_ax.yaxis, self.entropy_ax.xaxis):
            axis.set_major_locator(MaxNLocator(integer=True, nbins="auto"))
        self.animated = [self.image, self.ceiling_line, self.entropy_line,
                         *self.curve_lines.values(), self.marker, self.curve_ceiling, self.curve_ceiling_text]

    def layout(self, T: int, colour_scale: str = DEFAULT_COLOUR_SCALE) -> None:
        """Set the T-dependent limits and the colour scale, draw the static parts and cache them as the background."""
        self.show_colour_scale(colour_scale_named(colour_scale), [self.image])
        top = math.log(T) * 1.3 + 0.15  # the band above ln T holds the legends
        self.image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.heat_ax.set_xlim(-0.5, T - 0.5)
        self.heat_ax.set_ylim(T - 0.5, -0.5)
        self.entropy_ax.set_xlim(0, max(T - 1, 1))
        self.entropy_ax.set_ylim(0, top)
        self.curve_ax.set_ylim(0, top)
        self.cache_background((T, colour_scale))

    def render(self, settings: Settings, view: View | None, curves: dict[str, np.ndarray] | None) -> bytes:
        """Draw one view onto the cached background and return the figure as PNG bytes."""
        if self.layout_key != (settings.T, settings.colour_scale):
            self.layout(settings.T, settings.colour_scale)
        positions = np.arange(settings.T)
        if view is None:  # an error: blank panels, the message is shown as text
            self.image.set_data(np.full((settings.T, settings.T), np.nan))
            self.entropy_line.set_data([], [])
            self.ceiling_line.set_data([], [])
        else:
            self.image.set_data(self.colour_scale.values(view.weights))
            self.entropy_line.set_data(positions, view.entropy)
            self.ceiling_line.set_data(positions, view.ceiling)
        for name, line in self.curve_lines.items():
            if curves:
                line.set_data(CURVE_D_HEADS, curves[name])
            else:
                line.set_data([], [])
        self.marker.set_data([settings.d_head, settings.d_head], [0.0, math.log(settings.T)])
        ceiling = curve_ceiling(settings.T, settings.causal)
        self.curve_ceiling.set_ydata([ceiling, ceiling])
        self.curve_ceiling_text.set_y(ceiling)
        self.curve_ceiling_text.set_text(curve_ceiling_label(settings.T, settings.causal))
        return self.blit(self.animated)


class AttentionExplorer(HeatmapExplorer):
    """The widget: controls, the figure as an ``ipywidgets.Image`` and a summary line.

    Parameters
    ----------
    attention_fn : callable
        ``scaled_dot_product_attention(Q, K, V, mask=None, scale=True) -> (output, weights)``.
    mask_fn : callable
        ``causal_mask(T) -> bool (T, T)``, True = may attend.
    entropy_fn : callable
        ``attention_entropy(weights (..., T_q, T_k)) -> (..., T_q)``, nats.
    T, d_head : int
        Initial values (2 ≤ T ≤ 512; d_head one of :data:`D_HEAD_OPTIONS`).
    scale, causal : bool
    seed : int
        Initial seed of the random Q, K and V.
    colour_scale : str
        Initial colour scale of the heatmap, one of :data:`~attention_lab.core.plots.COLOUR_SCALES`
        (default "logarithmic": the causal triangle stays visible at T = 512).
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If T is outside [2, 512], d_head is not one of :data:`D_HEAD_OPTIONS`, or the colour scale is unknown.
    """

    def __init__(self, attention_fn, mask_fn, entropy_fn, *, T=16, d_head=64, scale=True, causal=True, seed=0,
                 colour_scale=DEFAULT_COLOUR_SCALE, sync=False):
        import ipywidgets as widgets

        check_settings(T=(T, 2 <= T <= T_MAX, f"between 2 and {T_MAX}"),
                       d_head=(d_head, d_head in D_HEAD_OPTIONS, f"one of {D_HEAD_OPTIONS}"))
        super().__init__(AttentionFigure(), (attention_fn, mask_fn, entropy_fn), T=T, T_max=T_MAX,
                         T_tooltip="sequence length: number of query and key positions", colour_scale=colour_scale,
                         sync=sync)
        self.d_slider = control(widgets.SelectionSlider, "d_head", d_head,
                                "size of each query/key vector (log-spaced)", options=D_HEAD_OPTIONS)
        self.scale_box = control(widgets.Checkbox, "scale by √d_head", scale,
                                 "divide the scores Q Kᵀ by √d_head before the softmax")
        self.causal_box = control(widgets.Checkbox, "causal mask", causal, "let query i attend only to keys j ≤ i")
        self.seed_slider, self.resample = self.seed_controls(
            seed, "random seed for the queries, keys and values", "resample", "draw new random Q, K, V (next seed)")
        self._curve_key, self._curves = None, None
        self.start([[self.T_slider, self.d_slider, self.scale_box],
                    [self.causal_box, self.seed_slider, self.resample, self.colour_dropdown]])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.T_slider.value, self.d_slider.value, self.scale_box.value, self.causal_box.value,
                        seed=self.seed_slider.value, colour_scale=self.colour_dropdown.value)

    def draw_inputs(self, seed: int):
        """Q, K, V for ``seed`` (:func:`draw_inputs`)."""
        return draw_inputs(seed)

    def curves(self, settings: Settings):
        """Entropy-vs-d_head curves for the current T, mask, seed and function definitions (cached)."""
        functions = tuple(latest(f) for f in self.functions)
        key = (settings.T, settings.causal, settings.seed, functions)
        if self._curve_key != key:
            self._curves = entropy_curves(*self.functions, settings.T, settings.causal,
                                          self._current_inputs(settings.seed))
            self._curve_key = key
        return self._curves

    def compute(self, settings: Settings) -> View:
        """The view for ``settings``, and the entropy-vs-d_head curves (kept for :meth:`render`)."""
        view = compute_view(*self.functions, settings, self._current_inputs(settings.seed))
        self.curves(settings)
        return view

    def render(self, settings: Settings) -> bytes:
        """The three panels for ``settings`` as PNG bytes; blank panels after a failure."""
        return self.figure.render(settings, self.view, self._curves if self.view is not None else None)


def explore_attention(attention_fn, mask_fn, entropy_fn, **settings):
    """Show the attention explorer for the given functions (see :class:`AttentionExplorer`); nothing under nbgrader.

    Returns
    -------
    AttentionExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the attention explorer", AttentionExplorer, attention_fn, mask_fn, entropy_fn, **settings)
