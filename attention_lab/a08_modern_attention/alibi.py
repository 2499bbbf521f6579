"""ALiBi's bias per head: the third explorer of the self-study notebook of assignment 8.

``explore_alibi(alibi_slopes)`` calls the given ``alibi_slopes`` — the reference in the self-study notebook, or a
learner's own — for n_heads heads and draws:

* every head's bias −m_h · (i − j) over (query position, key position) on one colour range, the future keys
  (−inf) black as in the masking explorer, so that the steep heads stand out from the gentle ones;
* the weights one query row i gets from the bias alone (every q · k = 0) under each head, as a (head, key position)
  heatmap on the logarithmic colour scale: the steep heads look at the last few tokens, the gentle ones far back;
* one line of text: the slopes, and over how many of the last keys the steepest and the gentlest head spread half
  of their weight.

Controls: n_heads, T and the query row. The slopes function is looked up again by name before every redraw; one
that raises, hangs or returns anything but n_heads positive numbers is reported in one red line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm, Normalize
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from attention_lab.a04_masking.visual import ALLOWED_COLORMAP, BLOCKED
from attention_lab.core.explorer import (BACKGROUNDS_KEPT, TITLE_Y, Explorer, ExplorerError, ExplorerFigure,
                                         call_for_visual, check_settings, control, reset_colour_bar_axes,
                                         unless_grading)
from attention_lab.core.plots import LOG_FLOOR

HEADS_MAX, T_MAX = 16, 64
FIGURE_SIZE = (13.0, 4.4)
HEADS_AREA = (0.04, 0.12, 0.42, 0.76)  # the grid of per-head bias heatmaps, in figure fractions
BIAS_BAR_RECT, WEIGHTS_RECT, WEIGHTS_BAR_RECT = (0.475, 0.12, 0.008, 0.76), (0.6, 0.22, 0.3, 0.66), \
    (0.91, 0.22, 0.008, 0.66)
HALF = 0.5  # the summary says over how many of the last keys each head spreads this share of its weight


class SlopesError(ExplorerError):
    """The ``alibi_slopes`` given to the explorer failed or returned something other than one slope per head."""


@dataclass(frozen=True)
class AlibiSettings:
    """One state of the ALiBi explorer's controls: n_heads, T and the query row i whose weights are drawn."""

    n_heads: int
    T: int
    row: int


@dataclass
class AlibiView:
    """Everything drawn for one :class:`AlibiSettings`.

    Attributes
    ----------
    slopes : ndarray of float, shape (n_heads,)
        As ``alibi_slopes`` returned them.
    bias : ndarray of float, shape (n_heads, T, T)
        −m_h · (i − j) for keys j ≤ i, −inf for j > i (:func:`bias_from_slopes`).
    weights : ndarray of float, shape (n_heads, T)
        softmax of row i of every head's bias: the weights when every q · k is 0.
    spans : ndarray of int, shape (n_heads,)
        How many of the last keys up to i hold half of each head's weight.
    summary : str
    """

    slopes: np.ndarray
    bias: np.ndarray
    weights: np.ndarray
    spans: np.ndarray
    summary: str


def bias_from_slopes(slopes: np.ndarray, T: int) -> np.ndarray:
    """ALiBi's causal bias for slopes m_h: −m_h · (i − j) for keys j ≤ query i, −inf for j > i (Press et al. 2022, §3).

    Parameters
    ----------
    slopes : ndarray of float, shape (n_heads,)
    T : int
        Queries and keys at positions 0 … T − 1.

    Returns
    -------
    ndarray of float, shape (n_heads, T, T)
    """
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]  # i − j
    return np.where(distance >= 0, -slopes[:, None, None] * distance, -np.inf)


def compute_alibi_view(alibi_slopes: Callable, settings: AlibiSettings) -> AlibiView:
    """The slopes, the bias and row i's weights under each head for one setting of the controls, and the summary.

    Raises
    ------
    SlopesError
        If ``alibi_slopes`` raises, hangs, or returns anything but n_heads finite real numbers > 0.
    """
    s = settings
    name = getattr(alibi_slopes, "__name__", "alibi_slopes")
    slopes = call_for_visual(alibi_slopes, s.n_heads, name=name)
    call = f"{name}({s.n_heads})"
    if not isinstance(slopes, np.ndarray) or slopes.shape != (s.n_heads,):
        got = f"shape {slopes.shape}" if isinstance(slopes, np.ndarray) else type(slopes).__name__
        raise SlopesError(f"{call} returned {got}; expected one slope per head, shape ({s.n_heads},)")
    if slopes.dtype.kind not in "fiu" or not np.isfinite(slopes).all() or (slopes <= 0).any():
        raise SlopesError(f"{call} returned {np.array2string(slopes, precision=4, threshold=8)}; every slope is a "
                          "finite number > 0 (a penalty that grows with the distance)")
    slopes = slopes.astype(float)
    bias = bias_from_slopes(slopes, s.T)
    row = bias[:, s.row, :]
    shifted = np.exp(row - row.max(axis=1, keepdims=True))  # the largest entry, at j = i, is 0: no overflow
    weights = shifted / shifted.sum(axis=1, keepdims=True)
    # the last keys first (i, i − 1, …): how many of them it takes to hold half of the weight
    nearest_first = np.cumsum(weights[:, s.row::-1], axis=1)
    spans = (nearest_first < HALF - 1e-12).sum(axis=1) + 1
    view = AlibiView(slopes, bias, weights, spans, "")
    steep, gentle = int(np.argmax(slopes)), int(np.argmin(slopes))
    keys = lambda n: f"{n} key{'s' if n > 1 else ''}"  # noqa: E731
    view.summary = (f"{s.n_heads} head{'s' if s.n_heads > 1 else ''}, slopes {slopes.max():.4g} … {slopes.min():.4g} "
                    f"(from {call}). With every q · k = 0, query {s.row} puts half its weight on the last "
                    f"{keys(int(spans[steep]))} under the steepest head ({steep}, slope {slopes[steep]:.4g}) and on "
                    f"the last {keys(int(spans[gentle]))} under the gentlest ({gentle}, slope {slopes[gentle]:.4g}); "
                    f"its {s.row + 1} allowed keys would get {1 / (s.row + 1):.3g} each without a bias. Future keys: "
                    "−inf (black).")
    return view


class AlibiFigure(ExplorerFigure):
    """A grid of bias heatmaps (one per head) and the weights of one query row per head.

    The Axes and images are built for each (n_heads, T) and only their data, colour range, titles and row marks
    change with the query row (or a redefined ``alibi_slopes``): rebuilding sixteen heatmaps costs more than drawing.
    Those are animated: the Axes, ticks and colour bars are drawn once per (n_heads, T, lowest bias) into a kept
    background and each redraw blits the animated artists onto it.
    """

    def __init__(self):
        super().__init__(FIGURE_SIZE, backgrounds_kept=BACKGROUNDS_KEPT)
        self.bias_bar_ax = self.figure.add_axes(BIAS_BAR_RECT)
        self.weights_ax = self.figure.add_axes(WEIGHTS_RECT)
        self.weights_bar_ax = self.figure.add_axes(WEIGHTS_BAR_RECT)
        self.bias_cmap = ALLOWED_COLORMAP.with_extremes(bad=BLOCKED)  # −inf (drawn as NaN): black, as masks are
        self.weights_cmap = ALLOWED_COLORMAP.with_extremes(bad=BLOCKED)
        self.head_axes: list = []
        self.bias_images: list = []
        self.row_lines: list = []
        self._pool: list = []  # (Axes, bias image, row line) per head, made once
        # the bias colour bar shows its own mappable, made once: the heads' images come and go with n_heads
        self.bias_scale = ScalarMappable(Normalize(-1.0, 0.0), self.bias_cmap)
        self.figure.colorbar(self.bias_scale, cax=self.bias_bar_ax, label="bias −m_h · (i − j)")
        self.weights_image = None
        self.grid = None  # the (n_heads, T) the Axes were built for
        self.weights_ax.set_xlabel("key position")
        self.weights_ax.set_ylabel("head")
        self.weights_ax.legend(handles=[Patch(color=BLOCKED, label="future key: bias −inf, weight 0")],
                               loc="upper left", bbox_to_anchor=(0.0, -0.16), fontsize="small", frameon=False)

    def layout(self, n_heads: int, T: int) -> None:
        """Place one heatmap per head in a grid of at most four columns, and the weights' image, for T positions.

        The heatmaps' Axes are made once each and kept, hidden when there are fewer heads (made anew, sixteen
        Axes and their ticks cost more than drawing them); each is set up here as a new one would be.
        """
        columns = min(n_heads, 4)
        rows = -(-n_heads // columns)
        left, bottom, width, height = HEADS_AREA
        gap_x, gap_y = 0.012, 0.05
        w, h = (width - gap_x * (columns - 1)) / columns, (height - gap_y * (rows - 1)) / rows
        while len(self._pool) < n_heads:
            ax = self.figure.add_axes((0.0, 0.0, 1.0, 1.0))
            image = ax.imshow(np.zeros((2, 2)), cmap=self.bias_cmap, norm=Normalize(-1.0, 0.0),
                              interpolation="nearest", aspect="auto", animated=True)
            line = ax.axhline(0, color="white", lw=0.8, animated=True)  # the query row drawn on the right
            ax.title.set_animated(True)  # its slope
            ax.tick_params(labelsize=6, length=2)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            self._pool.append((ax, image, line))
        for k, (ax, image, line) in enumerate(self._pool):
            ax.set_visible(k < n_heads)
            if k >= n_heads:
                continue
            row_from_top, column = divmod(k, columns)
            ax.set_position((left + (w + gap_x) * column, bottom + (h + gap_y) * (rows - 1 - row_from_top), w, h))
            image.set_data(np.zeros((T, T)))
            image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xlim(-0.5, T - 0.5)
            ax.set_ylim(T - 0.5, -0.5)
            # the left heatmap of each row labels its rows, the bottom heatmap of each column its columns
            ax.tick_params(labelleft=not column, labelbottom=k + columns >= n_heads)
            ax.set_ylabel("query position" if k == 0 else "", fontsize=8)
            ax.set_xlabel("key position" if k == n_heads - 1 else "", fontsize=8)
        self.head_axes = [ax for ax, _, _ in self._pool[:n_heads]]
        self.bias_images = [image for _, image, _ in self._pool[:n_heads]]
        self.row_lines = [line for _, _, line in self._pool[:n_heads]]
        ax = self.weights_ax
        if self.weights_image is not None:
            self.weights_image.remove()
        self.weights_image = ax.imshow(np.ones((n_heads, T)), cmap=self.weights_cmap, norm=LogNorm(LOG_FLOOR, 1.0),
                                       interpolation="nearest", aspect="auto", animated=True)
        ax.title.set_animated(True)  # the query row
        ax.set_xlim(-0.5, T - 0.5)
        ax.set_ylim(n_heads - 0.5, -0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_yticks(range(n_heads))
        ax.tick_params(axis="y", labelsize=7 if n_heads > 8 else 9)
        reset_colour_bar_axes(self.weights_bar_ax, WEIGHTS_BAR_RECT)
        self.figure.colorbar(self.weights_image, cax=self.weights_bar_ax, label="attention weight (log scale)",
                             extend="min")
        self.grid = (n_heads, T)
        self.layout_key = None  # other Axes: a background drawn before shows another grid
        self._kept_backgrounds.clear()
        self.animated = [*self.bias_images, *self.row_lines, *(a.title for a in self.head_axes), self.weights_image,
                         self.weights_ax.title]

    def render(self, settings: AlibiSettings, view: AlibiView | None) -> bytes:
        """Draw one view (empty panels when ``view`` is None) and return the figure as PNG bytes."""
        s = settings
        if self.grid != (s.n_heads, s.T):
            self.layout(s.n_heads, s.T)
        finite = np.where(np.isfinite(view.bias), view.bias, np.nan) if view is not None else \
            np.full((s.n_heads, s.T, s.T), np.nan)
        lowest = float(np.nanmin(finite)) if view is not None else -1.0
        for h, (ax, image, line) in enumerate(zip(self.head_axes, self.bias_images, self.row_lines)):
            image.set_data(finite[h])
            image.set_clim(min(lowest, -1e-12), 0.0)  # one range for every head: the steep ones reach far below 0
            line.set_ydata([s.row, s.row])
            ax.set_title(f"head {h}" + (f", m = {view.slopes[h]:.3g}" if view is not None else ""), fontsize=8, pad=2,
                         y=TITLE_Y)
        self.bias_scale.set_clim(min(lowest, -1e-12), 0.0)
        weights = np.full((s.n_heads, s.T), np.nan) if view is None else np.where(
            np.arange(s.T)[None, :] <= s.row, np.clip(view.weights, LOG_FLOOR, 1.0), np.nan)
        self.weights_image.set_data(weights)
        self.weights_ax.set_title(f"weights of query {s.row} from the bias alone (q · k = 0)", fontsize=10,
                                  y=TITLE_Y)
        if self.layout_key != (s.n_heads, s.T, lowest):  # the bias colour bar shows the range
            self.cache_background((s.n_heads, s.T, lowest))
        return self.blit(self.animated)


class AlibiExplorer(Explorer):
    """The widget: n_heads, T and the query row above the per-head biases and that row's weights.

    Parameters
    ----------
    alibi_slopes : callable
        ``alibi_slopes(n_heads)`` → one slope per head, shape (n_heads,).
    n_heads : int
        1 … :data:`HEADS_MAX`.
    T : int
        2 … :data:`T_MAX`.
    row : int, optional
        The query row, 0 … T − 1 (default T − 1, the last token).
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If a setting is not one allowed; the message names the values allowed.
    """

    def __init__(self, alibi_slopes: Callable, *, n_heads: int = 8, T: int = 32, row: int | None = None,
                 sync: bool = False):
        import ipywidgets as widgets

        integer = lambda v, low, top: isinstance(v, int) and not isinstance(v, bool) and low <= v <= top  # noqa: E731
        check_settings(n_heads=(n_heads, integer(n_heads, 1, HEADS_MAX),
                                f"an integer from 1 to {HEADS_MAX}"),
                       T=(T, integer(T, 2, T_MAX), f"an integer from 2 to {T_MAX}"))
        row = T - 1 if row is None else row
        check_settings(row=(row, integer(row, 0, T - 1), f"an integer from 0 to T − 1 = {T - 1}"))
        super().__init__(AlibiFigure(), sync=sync)
        self.alibi_slopes = alibi_slopes
        self.heads_slider = control(widgets.IntSlider, "n_heads", n_heads, "heads, each with its own slope",
                                    min=1, max=HEADS_MAX)
        self.T_slider = control(widgets.IntSlider, "T", T, "number of query and key positions", min=2,
                                max=T_MAX)
        self.row_slider = control(widgets.IntSlider, "query i", row, "the query row whose weights are drawn",
                                  min=0, max=T - 1)
        self.start([[self.heads_slider, self.T_slider, self.row_slider]], follow=[(self.T_slider, self._fit_row)])

    def _fit_row(self, T: int) -> None:
        """Keep the query row among the T positions (at the last one when it was there)."""
        last = self.row_slider.value == self.row_slider.max
        self.row_slider.max = max(T - 1, self.row_slider.min)
        self.row_slider.value = T - 1 if last else min(self.row_slider.value, T - 1)

    @property
    def settings(self) -> AlibiSettings:
        """The controls' current values."""
        return AlibiSettings(self.heads_slider.value, self.T_slider.value, self.row_slider.value)

    def compute(self, settings: AlibiSettings) -> AlibiView:
        """The bias and the weights for ``settings`` (:func:`compute_alibi_view`)."""
        return compute_alibi_view(self.alibi_slopes, settings)


def explore_alibi(alibi_slopes: Callable, **settings):
    """Show ALiBi's bias per head for an ``alibi_slopes`` (see :class:`AlibiExplorer`), unless nbgrader is running.

    Parameters
    ----------
    alibi_slopes : callable
        ``alibi_slopes(n_heads)`` → ndarray of shape (n_heads,).
    **settings
        ``n_heads``, ``T``, ``row``.

    Returns
    -------
    AlibiExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).

    Raises
    ------
    ValueError
        If an initial setting is not allowed (:class:`AlibiExplorer`).
    """
    return unless_grading("the ALiBi explorer", AlibiExplorer, alibi_slopes, **settings)
