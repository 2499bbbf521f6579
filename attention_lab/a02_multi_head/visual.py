"""The multi-head explorer: one attention heatmap per head, a head selector and each head's entropy.

``explore_multi_head(multi_head_attention, attention_entropy)`` runs the given
multi-head attention on random tokens x (T, d_model) with random projections,
``d_model`` fixed at :data:`D_MODEL`, and shows:

* every head's weights as a small heatmap, tiled in one mosaic (head 0 top
  left, row by row), the selected head framed;
* the selected head's weights large, rows = query position, columns = key
  position, on ``viridis`` in the chosen colour scale (logarithmic 10⁻⁴…1 by
  default, linear 0…1, or each row divided by its largest weight), which the
  mosaic shares;
* each head's mean row entropy in nats as a bar, against the uniform ceiling
  (the mean of ln(i + 1) over causal rows, ln T without a mask);
* one line of text: d_head, the selected head's entropy and largest weight
  (outside row 0 under the causal mask, where row 0's weight is always 1),
  the most and least focused heads, and whether any head puts weight on a
  future key.

Changing ``n_heads`` changes ``d_head = d_model / n_heads``: with the scaling
by √d_head every head's scores keep the same spread, so with the random
weights used here the heads differ by what they look at, not by how sharp
they are (trained heads can differ in sharpness too).

It runs on whatever functions it is given — the learner's own at the end of
assignment 2, the reference in the self-study notebook — and looks each one
up again by name before every redraw, so re-running a fixed solution cell is
picked up. An error from those functions, or a result of the wrong shape or
with NaN, is shown as one message.

Speed follows :mod:`attention_lab.a01_attention.visual`: inputs drawn once per seed at
the largest size and sliced; one Agg figure; axes, labels and colour bars
drawn once per (T, n_heads, colour scale) and restored from a cached background, only the
changed artists drawn on top; one PNG encode per redraw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib import colormaps
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from attention_lab.core.explorer import (BACKGROUNDS_KEPT, DPI, TITLE_Y,
                                         ExplorerError, ExplorerFigure, HeatmapExplorer, HeatmapSettings,
                                         call_for_visual as _call,
                                         check_settings, control, function_name as _name,
                                         largest_weight_text, unless_grading)
from attention_lab.core.plots import (COLORMAP, CURVE_COLOURS, DEFAULT_COLOUR_SCALE, REFERENCE_COLOUR,
                                      colour_scale_named)

D_MODEL = 64
N_HEADS_OPTIONS = (1, 2, 4, 8, 16)  # the divisors of D_MODEL that leave d_head ≥ 4
T_MAX = 64
#: Standard deviation of the projections' entries times √d_model: 1 keeps q and k entries near unit variance;
#: 1.5 spreads each head's scaled scores enough that heads focus visibly differently.
PROJECTION_GAIN = 1.5
FIGURE_SIZE = (12.0, 4.0)  # inches at DPI dots per inch
# Axes rectangles in figure fractions (left, bottom, width, height); fixed so tests can find the panels' pixels.
MOSAIC_RECT = (0.035, 0.12, 0.25, 0.74)
HEAD_RECT = (0.37, 0.12, 0.21, 0.74)
COLORBAR_RECT = (0.59, 0.12, 0.01, 0.74)
ENTROPY_RECT = (0.725, 0.12, 0.265, 0.74)
HIGHLIGHT = "#CC3311"  # the selected head's frame and bar (Tol's vibrant red): 20+ darker than BAR, lighter than black
BAR = CURVE_COLOURS[1]  # light: the selected head's bar and the black ceiling differ from it in lightness


@dataclass(frozen=True)
class Settings(HeatmapSettings):
    """One state of the controls."""

    T: int
    n_heads: int
    head: int
    causal: bool

    @property
    def d_head(self) -> int:
        """Size of each head, d_model / n_heads."""
        return D_MODEL // self.n_heads


@dataclass
class View:
    """Everything drawn for one :class:`Settings`.

    Attributes
    ----------
    weights : ndarray, shape (n_heads, T, T)
    entropy : ndarray, shape (n_heads,), nats — each head's mean row entropy
    ceiling : float, nats — the mean uniform ceiling over the rows
    mosaic : ndarray — every head's weights tiled, NaN in the gaps
    summary : str
    """

    weights: np.ndarray
    entropy: np.ndarray
    ceiling: float
    mosaic: np.ndarray
    summary: str


def draw_inputs(seed: int) -> tuple[np.ndarray, ...]:
    """Random tokens and projections for one seed, drawn once at the largest size.

    Every view slices x, so the picture changes only when a control changes.

    Parameters
    ----------
    seed : int
        Seed of a local ``numpy.random.default_rng`` (the global state is untouched).

    Returns
    -------
    tuple of numpy.ndarray
        ``x`` (T_MAX, D_MODEL) with entries ~ N(0, 1), then ``W_q, W_k, W_v, W_o``
        (D_MODEL, D_MODEL) with entries ~ N(0, (PROJECTION_GAIN / √D_MODEL)²).
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T_MAX, D_MODEL))
    projections = (rng.standard_normal((D_MODEL, D_MODEL)) * PROJECTION_GAIN / math.sqrt(D_MODEL) for _ in range(4))
    return (x, *projections)


def grid_shape(n_heads: int) -> tuple[int, int]:
    """Layout of the mosaic of ``n_heads`` tiles.

    Parameters
    ----------
    n_heads : int
        Number of tiles, ≥ 1.

    Returns
    -------
    (int, int)
        (rows, columns) with rows · columns = n_heads, as square as possible, columns ≥ rows.
    """
    rows = int(math.isqrt(n_heads))
    while n_heads % rows:
        rows -= 1
    return rows, n_heads // rows


def gap(T: int) -> int:
    """Width of the blank gap between tiles of T × T weights, in weight cells: T // 16, at least 1."""
    return max(1, T // 16)


def tile_origin(head: int, n_heads: int, T: int) -> tuple[int, int]:
    """Where ``head``'s tile starts in the mosaic of ``n_heads`` tiles of T × T weights.

    Returns
    -------
    (int, int)
        (row, column) of the tile's top-left cell; head 0 is top left, then row by row.
    """
    _, columns = grid_shape(n_heads)
    step = T + gap(T)
    return (head // columns) * step, (head % columns) * step


def mosaic(weights: np.ndarray) -> np.ndarray:
    """Tile every head's weights into one 2-D array, drawn as a single image.

    Parameters
    ----------
    weights : numpy.ndarray, shape (n_heads, T, T)

    Returns
    -------
    numpy.ndarray of float, 2-D
        Head h at :func:`tile_origin` (h, n_heads, T); NaN in the gaps (drawn white).
    """
    n_heads, T, _ = weights.shape
    rows, columns = grid_shape(n_heads)
    step = T + gap(T)
    tiled = np.full((rows * step - gap(T), columns * step - gap(T)), np.nan)
    for head in range(n_heads):
        top, left = tile_origin(head, n_heads, T)
        tiled[top:top + T, left:left + T] = weights[head]
    return tiled


def ceiling(T: int, causal: bool) -> float:
    """The uniform ceiling of a head's mean row entropy, in nats.

    Row i of causal attention may spread over i + 1 keys (entropy at most
    ln(i + 1)); without a mask every row over T keys (at most ln T).

    Returns
    -------
    float
        The mean of the rows' ceilings.
    """
    return float(np.mean(np.log(np.arange(1, T + 1)))) if causal else math.log(T)


def _weights(attention_fn, settings: Settings, inputs) -> np.ndarray:
    x, W_q, W_k, W_v, W_o = inputs
    T, n_heads = settings.T, settings.n_heads
    mask = np.tril(np.ones((T, T), dtype=bool)) if settings.causal else None
    result = _call(attention_fn, x[:T], W_q, W_k, W_v, W_o, n_heads, mask=mask)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ExplorerError(f"{_name(attention_fn)} should return (output, weights); it returned "
                            f"{type(result).__name__}")
    weights = result[1]
    expected = (n_heads, T, T)
    if not isinstance(weights, np.ndarray) or weights.shape != expected:
        got = f"shape {weights.shape}" if isinstance(weights, np.ndarray) else type(weights).__name__
        raise ExplorerError(f"{_name(attention_fn)} returned weights of {got}; expected (n_heads, T, T) = {expected}")
    if weights.dtype.kind not in "fiub":
        raise ExplorerError(f"{_name(attention_fn)} returned weights of dtype {weights.dtype}; expected real numbers")
    bad = ~np.isfinite(weights)
    if bad.any():
        head, row, _ = (int(i) for i in np.argwhere(bad)[0])
        raise ExplorerError(f"{_name(attention_fn)} returned {int(bad.sum())} NaN or infinite weight(s), first in "
                            f"head {head}, query row {row}: a row whose keys are all blocked gives 0/0, and exp of "
                            "large scores overflows")
    return weights.astype(float, copy=False)


def _head_entropy(entropy_fn, weights: np.ndarray) -> np.ndarray:
    entropy = _call(entropy_fn, weights)
    if not isinstance(entropy, np.ndarray) or entropy.dtype.kind not in "fiu":
        got = f"dtype {entropy.dtype}" if isinstance(entropy, np.ndarray) else type(entropy).__name__
        raise ExplorerError(f"{_name(entropy_fn)} should return a real-valued array; it returned {got}")
    if entropy.shape != weights.shape[:-1]:
        raise ExplorerError(f"{_name(entropy_fn)} returned shape {entropy.shape}; expected (n_heads, T) = "
                            f"{weights.shape[:-1]}")
    if not np.all(np.isfinite(entropy)):
        raise ExplorerError(f"{_name(entropy_fn)} returned NaN or infinity: 0 · log 0 must count as 0 "
                            "(0 * np.log(0) is NaN in NumPy)")
    return entropy.astype(float, copy=False).mean(axis=-1)


def compute_view(attention_fn, entropy_fn, settings: Settings, inputs) -> View:
    """Weights, per-head mean entropies, the mosaic and the summary line for one setting of the controls.

    Parameters
    ----------
    attention_fn : callable
        ``multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None) -> (output, weights (n_heads, T, T))``.
    entropy_fn : callable
        ``attention_entropy(weights (..., T_q, T_k)) -> (..., T_q)``, nats.
    settings : Settings
    inputs : tuple
        :func:`draw_inputs` for ``settings.seed``.

    Raises
    ------
    ExplorerError
        If a function raises, or returns the wrong shape, dtype or NaN.
    """
    weights = _weights(attention_fn, settings, inputs)
    entropy = _head_entropy(entropy_fn, weights)
    top = ceiling(settings.T, settings.causal)
    head = settings.head
    leaks = int(np.count_nonzero(np.triu(np.ones((settings.T, settings.T), dtype=bool), 1) & (weights != 0)))
    heads_word = "head" if settings.n_heads == 1 else "heads"
    parts = [f"{settings.n_heads} {heads_word} of d_head = {settings.d_head} (d_model = {D_MODEL}), T = {settings.T}, "
             f"{'causal mask' if settings.causal else 'no mask'}: head {head} has mean row entropy "
             f"{entropy[head]:.2f} nats (uniform ceiling {top:.2f}) and "
             f"{largest_weight_text(weights[head], settings.causal)}"]
    if settings.n_heads > 1:
        parts.append(f"most focused: head {int(np.argmin(entropy))} ({entropy.min():.2f} nats), most spread: head "
                     f"{int(np.argmax(entropy))} ({entropy.max():.2f} nats)")
    parts.append("no head puts weight on a future key" if leaks == 0 else
                 f"{leaks} weight{'s' if leaks != 1 else ''} on future keys (above the diagonal) "
                 f"{'are' if leaks != 1 else 'is'} not zero")
    return View(weights, entropy, top, mosaic(weights), " · ".join(parts))


class MultiHeadFigure(ExplorerFigure):
    """The mosaic, the selected head and the entropy bars, redrawn by blitting.

    :meth:`layout` draws the static parts once per (T, n_heads, colour scale); :meth:`render`
    restores them and draws only the animated artists, then encodes PNG bytes.
    """

    def __init__(self):
        super().__init__(FIGURE_SIZE, backgrounds_kept=BACKGROUNDS_KEPT)
        cmap = colormaps[COLORMAP].with_extremes(bad="white")  # the gaps between tiles are NaN
        self.mosaic_ax = self.figure.add_axes(MOSAIC_RECT)
        self.mosaic_image = self.mosaic_ax.imshow(np.zeros((2, 2)), cmap=cmap, interpolation="nearest",
                                                  aspect="equal", animated=True)
        self.mosaic_ax.set_xticks([])
        self.mosaic_ax.set_yticks([])
        self.mosaic_ax.set_xlabel("key position (in each tile)", labelpad=8)
        self.mosaic_ax.set_ylabel("query position")
        for spine in self.mosaic_ax.spines.values():
            spine.set_visible(False)
        self.frame = Rectangle((0, 0), 1, 1, fill=False, edgecolor=HIGHLIGHT, linewidth=2.0, animated=True,
                               clip_on=False)  # around an outer tile the frame lies just outside the axes
        self.mosaic_ax.add_patch(self.frame)

        self.head_ax = self.figure.add_axes(HEAD_RECT)
        self.head_image = self.head_ax.imshow(np.zeros((2, 2)), cmap=cmap, interpolation="nearest", aspect="auto",
                                              animated=True)
        self.head_ax.set_xlabel("key position")
        self.head_ax.set_ylabel("query position")
        self.head_title = self.head_ax.set_title("", fontsize=10, animated=True, y=TITLE_Y)
        for axis in (self.head_ax.xaxis, self.head_ax.yaxis):
            axis.set_major_locator(MaxNLocator(integer=True, nbins="auto"))
        self.add_weight_colour_bar(COLORBAR_RECT)

        self.entropy_ax = self.figure.add_axes(ENTROPY_RECT)
        self.entropy_ax.set_xlabel("head")
        self.entropy_ax.set_ylabel("mean row entropy (nats)")
        self.entropy_ax.set_title("entropy per head", fontsize=10, y=TITLE_Y)
        (self.ceiling_line,) = self.entropy_ax.plot([], [], "--", color=REFERENCE_COLOUR, animated=True,
                                                    label="uniform ceiling")
        self.bars: list[Rectangle] = []

    def layout(self, T: int, n_heads: int, colour_scale: str = DEFAULT_COLOUR_SCALE) -> None:
        """Set the (T, n_heads)-dependent parts and the colour scale, draw the static figure and cache it."""
        self.show_colour_scale(colour_scale_named(colour_scale), [self.mosaic_image, self.head_image])
        rows, columns = grid_shape(n_heads)
        height = rows * (T + gap(T)) - gap(T)
        width = columns * (T + gap(T)) - gap(T)
        self.mosaic_image.set_extent((-0.5, width - 0.5, height - 0.5, -0.5))
        self.mosaic_ax.set_xlim(-0.5, width - 0.5)
        self.mosaic_ax.set_ylim(height - 0.5, -0.5)
        self.mosaic_ax.set_title(f"all {n_heads} heads, head 0 top left" if n_heads > 1 else "the only head",
                                 fontsize=10, y=TITLE_Y)
        self.head_image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.head_ax.set_xlim(-0.5, T - 0.5)
        self.head_ax.set_ylim(T - 0.5, -0.5)

        for bar in self.bars:
            bar.remove()
        self.bars = list(self.entropy_ax.bar(np.arange(n_heads), np.zeros(n_heads), width=0.7, color=BAR,
                                             animated=True))
        self.entropy_ax.set_xlim(-0.6, n_heads - 0.4)
        self.entropy_ax.set_xticks(np.arange(n_heads))
        self.entropy_ax.tick_params(axis="x", labelsize=8 if n_heads > 8 else 10)
        self.entropy_ax.set_ylim(0, math.log(T) * 1.25 + 0.1)  # the band above ln T holds the legend
        legend = self.entropy_ax.get_legend()
        if legend is None:
            self.entropy_ax.legend(handles=[self.ceiling_line, Rectangle((0, 0), 1, 1, color=BAR),
                                            Rectangle((0, 0), 1, 1, color=HIGHLIGHT)],
                                   labels=["uniform ceiling", "head", "selected"], loc="upper center",
                                   ncol=3, fontsize="small", columnspacing=0.8, handlelength=1.5)
        self.cache_background((T, n_heads, colour_scale))

    @property
    def animated(self) -> list:
        """The artists drawn at each redraw (the bars change with n_heads)."""
        return [self.mosaic_image, self.frame, self.head_image, self.head_title, self.ceiling_line, *self.bars]

    def render(self, settings: Settings, view: View | None) -> bytes:
        """Draw one view onto the cached background and return the figure as PNG bytes."""
        T, n_heads = settings.T, settings.n_heads
        if self.layout_key != (T, n_heads, settings.colour_scale):
            self.layout(T, n_heads, settings.colour_scale)
        top, left = tile_origin(settings.head, n_heads, T)
        margin = gap(T) / 2  # the frame runs through the middle of the gap, so it hides no weight
        self.frame.set_xy((left - 0.5 - margin, top - 0.5 - margin))
        self.frame.set_width(T + 2 * margin)
        self.frame.set_height(T + 2 * margin)
        self.frame.set_visible(n_heads > 1)  # a single tile needs no frame
        if view is None:  # an error: blank panels, the message is shown as text
            self.mosaic_image.set_data(np.full((2, 2), np.nan))
            self.head_image.set_data(np.full((T, T), np.nan))
            self.head_title.set_text("")
            self.ceiling_line.set_data([], [])
            for bar in self.bars:
                bar.set_height(0.0)
        else:
            drawn = self.colour_scale.values(view.weights)  # row-normalised per head, before tiling
            self.mosaic_image.set_data(view.mosaic if drawn is view.weights else mosaic(drawn))
            self.head_image.set_data(drawn[settings.head])
            self.head_title.set_text(f"head {settings.head} of {n_heads} (d_head = {settings.d_head})")
            self.ceiling_line.set_data([-0.6, n_heads - 0.4], [view.ceiling, view.ceiling])
            for index, (bar, value) in enumerate(zip(self.bars, view.entropy)):
                bar.set_height(float(value))
                bar.set_color(HIGHLIGHT if index == settings.head else BAR)
        return self.blit(self.animated)


class MultiHeadExplorer(HeatmapExplorer):
    """The widget: controls, the figure as an ``ipywidgets.Image`` and a summary line.

    Parameters
    ----------
    attention_fn : callable
        ``multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None) -> (output, weights)``.
    entropy_fn : callable
        ``attention_entropy(weights (..., T_q, T_k)) -> (..., T_q)``, nats.
    T : int
        Initial sequence length, 2 ≤ T ≤ :data:`T_MAX`.
    n_heads : int
        Initial number of heads, one of :data:`N_HEADS_OPTIONS`.
    head : int
        Initially selected head, 0 ≤ head < n_heads.
    causal : bool
    seed : int
        Initial seed of the tokens and the projections.
    colour_scale : str
        Initial colour scale of the heatmaps, one of :data:`~attention_lab.core.plots.COLOUR_SCALES`.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If T, n_heads or head is out of range, or the colour scale unknown; the message names the values allowed.
    """

    def __init__(self, attention_fn, entropy_fn, *, T=16, n_heads=4, head=0, causal=True, seed=0,
                 colour_scale=DEFAULT_COLOUR_SCALE, sync=False):
        import ipywidgets as widgets

        check_settings(
            T=(T, isinstance(T, int) and 2 <= T <= T_MAX, f"an integer between 2 and {T_MAX}"),
            n_heads=(n_heads, n_heads in N_HEADS_OPTIONS,
                     f"one of {N_HEADS_OPTIONS} (divisors of d_model = {D_MODEL})"))
        check_settings(head=(head, isinstance(head, int) and 0 <= head < n_heads,
                             f"an integer between 0 and n_heads - 1 = {n_heads - 1}"))
        super().__init__(MultiHeadFigure(), (attention_fn, entropy_fn), T=T, T_max=T_MAX,
                         T_tooltip="sequence length: number of query and key positions", colour_scale=colour_scale,
                         sync=sync)
        self.heads_slider = control(
            widgets.SelectionSlider, "n_heads", n_heads,
            f"number of heads; d_model = {D_MODEL} is fixed, so d_head = {D_MODEL} / n_heads", options=N_HEADS_OPTIONS)
        self.head_slider = control(widgets.IntSlider, "head", head, "the head shown large and framed in the mosaic",
                                   min=0, max=n_heads - 1)
        self.causal_box = control(widgets.Checkbox, "causal mask", causal,
                                  "let query i attend only to keys j ≤ i, in every head")
        self.seed_slider, self.resample = self.seed_controls(
            seed, "random seed for the tokens x and the projections W", "resample",
            "draw new random x and W (next seed)")
        self.start([[self.T_slider, self.heads_slider, self.head_slider],
                    [self.causal_box, self.seed_slider, self.resample, self.colour_dropdown]],
                   follow=[(self.heads_slider, self._keep_head_in_range)])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.T_slider.value, self.heads_slider.value, self.head_slider.value, self.causal_box.value,
                        seed=self.seed_slider.value, colour_scale=self.colour_dropdown.value)

    def _keep_head_in_range(self, n_heads: int) -> None:
        self.head_slider.value = min(self.head_slider.value, n_heads - 1)
        self.head_slider.max = n_heads - 1

    def draw_inputs(self, seed: int):
        """Tokens and projections for ``seed`` (:func:`draw_inputs`)."""
        return draw_inputs(seed)

    def compute(self, settings: Settings) -> View:
        """The view for ``settings`` (:func:`compute_view`)."""
        return compute_view(*self.functions, settings, self._current_inputs(settings.seed))


def explore_multi_head(attention_fn: Callable, entropy_fn: Callable, **settings):
    """Show the multi-head explorer (see :class:`MultiHeadExplorer`), or under nbgrader only a note.

    Returns
    -------
    MultiHeadExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the multi-head explorer", MultiHeadExplorer, attention_fn, entropy_fn, **settings)
