"""The cost of generating tokens with and without a key/value cache, as an interactive plot.

``explore_cache_cost(attention_cost_per_token)`` calls the given cost model —
the learner's own at the end of assignment 5, the reference in the self-study
notebook — for every token position t = 1 … T, with and without the cache,
and shows:

* the multiply-adds spent on token t (left): a straight line with the cache,
  a parabola without it;
* the multiply-adds spent on the first t tokens together (right): quadratic
  against cubic;
* one line of text with both numbers for token T and for all T tokens, and
  how many times more recomputing costs.

Controls: ``T`` (how many tokens are generated), ``d_model``, ``d_head`` and
logarithmic axes. One Agg figure is kept and redrawn in place, then shown
as an ``ipywidgets.Image``; the cost model is looked up again by name before
every redraw, so re-running a fixed solution cell is picked up. A cost model
that raises, hangs or returns something other than a non-negative number is
reported in one line instead of a plot.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.ticker import MaxNLocator

from attention_lab.core.explorer import (DPI, Explorer, ExplorerError, ExplorerFigure, call_for_visual, check_settings,
                                         control, latest, unless_grading)
from attention_lab.core.plots import CURVE_COLOURS

T_OPTIONS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
D_MODEL_OPTIONS = (64, 128, 256, 512, 768, 1024, 2048, 4096)
D_HEAD_OPTIONS = (8, 16, 32, 64, 128, 256)
FIGURE_SIZE = (11.0, 3.6)  # inches at DPI dots per inch
# Axes rectangles in figure fractions (left, bottom, width, height): fixed, because a layout engine would
# re-measure every tick label on each redraw (about a second per redraw on a 2-core machine).
PER_TOKEN_RECT = (0.075, 0.15, 0.39, 0.74)
TOTAL_RECT = (0.585, 0.15, 0.39, 0.74)
CACHED_STYLE = {"color": CURVE_COLOURS[0], "linestyle": "-", "label": "with the KV cache"}
RECOMPUTE_STYLE = {"color": CURVE_COLOURS[1], "linestyle": "--", "label": "without (recompute all t tokens)"}


class CostModelError(ExplorerError):
    """The cost model given to the plot failed or returned something other than a count."""


@dataclass(frozen=True)
class Settings:
    """One state of the controls."""

    T: int
    d_model: int
    d_head: int
    log_scale: bool


@dataclass
class CostView:
    """Everything drawn for one :class:`Settings`.

    Attributes
    ----------
    t : ndarray of int, shape (T,)
        Token positions 1 … T.
    cached, recomputed : ndarray of float, shape (T,)
        Multiply-adds for token t with and without the cache.
    total_cached, total_recomputed : ndarray of float, shape (T,)
        Multiply-adds for tokens 1 … t together.
    summary : str
    """

    t: np.ndarray
    cached: np.ndarray
    recomputed: np.ndarray
    total_cached: np.ndarray
    total_recomputed: np.ndarray
    summary: str


def readable(count: float) -> str:
    """A count in words a reader takes in at a glance: 950, 12.3 thousand, 4.56 million, 7.8 billion, …"""
    for size, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"), (1e3, "thousand")):
        if abs(count) >= size:
            return f"{count / size:.3g} {word}"
    return f"{count:.0f}"


def _counts(cost_fn: Callable, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """The cost model's counts for t = 1 … T with and without the cache, checked."""
    function = latest(cost_fn)
    name = getattr(cost_fn, "__name__", "the cost model")
    T, d_model, d_head = settings.T, settings.d_model, settings.d_head

    def all_counts():
        return ([function(t, d_model, d_head, True) for t in range(1, T + 1)],
                [function(t, d_model, d_head, False) for t in range(1, T + 1)])

    # all 2·T calls of one redraw share one time limit
    cached, recomputed = call_for_visual(all_counts, name=name)
    for flag, values in ((True, cached), (False, recomputed)):
        for t, value in enumerate(values, start=1):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise CostModelError(f"{name}({t}, {d_model}, {d_head}, cached={flag}) returned "
                                     f"{type(value).__name__} {value!r:.60}; expected a number of multiply-adds")
            if not math.isfinite(value) or value < 0:
                raise CostModelError(f"{name}({t}, {d_model}, {d_head}, cached={flag}) returned {value!r}; "
                                     "a count of multiply-adds is a finite number ≥ 0")
    return np.array(cached, dtype=float), np.array(recomputed, dtype=float)


def compute_view(cost_fn: Callable, settings: Settings) -> CostView:
    """Counts per token and cumulative counts for one setting of the controls, and the summary line.

    Raises
    ------
    CostModelError
        If the cost model raises, hangs or returns something other than a
        finite number ≥ 0.
    """
    cached, recomputed = _counts(cost_fn, settings)
    total_cached, total_recomputed = np.cumsum(cached), np.cumsum(recomputed)
    T = settings.T

    def times(more: float, less: float) -> str:
        return f"{more / less:.3g}× the work" if less > 0 else "no work with the cache"

    summary = (f"d_model = {settings.d_model}, d_head = {settings.d_head}: token {T} costs "
               f"{readable(cached[-1])} multiply-adds with the cache and {readable(recomputed[-1])} without "
               f"({times(recomputed[-1], cached[-1])}); all {T} tokens cost {readable(total_cached[-1])} with the "
               f"cache and {readable(total_recomputed[-1])} without ({times(total_recomputed[-1], total_cached[-1])}).")
    return CostView(np.arange(1, T + 1), cached, recomputed, total_cached, total_recomputed, summary)


class CostFigure(ExplorerFigure):
    """The per-token and cumulative panels, redrawn in place (their axes change with every view)."""

    def __init__(self):
        super().__init__(FIGURE_SIZE)
        self.per_token_ax = self.figure.add_axes(PER_TOKEN_RECT)
        self.total_ax = self.figure.add_axes(TOTAL_RECT)
        self.lines = {}
        for key, ax in (("per_token", self.per_token_ax), ("total", self.total_ax)):
            (cached,) = ax.plot([], [], lw=1.8, **CACHED_STYLE)
            (recomputed,) = ax.plot([], [], lw=1.8, **RECOMPUTE_STYLE)
            self.lines[key] = (cached, recomputed)
            ax.set_xlabel("token position t")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
            ax.legend(loc="upper left", fontsize="small")
        self.per_token_ax.set_ylabel("multiply-adds for token t")
        self.per_token_ax.set_title("cost of generating token t", fontsize=10)
        self.total_ax.set_ylabel("multiply-adds for tokens 1 … t")
        self.total_ax.set_title("cost of generating the first t tokens", fontsize=10)

    def render(self, settings: Settings, view: CostView | None) -> bytes:
        """Draw one view (or empty panels when ``view`` is None) and return the figure as PNG bytes."""
        for key, ax in (("per_token", self.per_token_ax), ("total", self.total_ax)):
            cached_line, recomputed_line = self.lines[key]
            if view is None:
                cached_line.set_data([], [])
                recomputed_line.set_data([], [])
                use_log, bottom, top = False, 0.0, 1.0
            else:
                cached, recomputed = ((view.cached, view.recomputed) if key == "per_token"
                                      else (view.total_cached, view.total_recomputed))
                cached_line.set_data(view.t, cached)
                recomputed_line.set_data(view.t, recomputed)
                values = np.concatenate([cached, recomputed])
                positive = values[values > 0]
                use_log = settings.log_scale and positive.size > 0
                top = float(max(values.max(), 1.0))
                bottom, top = (float(positive.min()) / 1.5, top * 3.0) if use_log else (0.0, top * 1.08)
            scale = "log" if use_log else "linear"
            if ax.get_xscale() != scale:  # setting a scale rebuilds every tick: only when it changes
                # log-log axes turn power laws into straight lines: slope 1 (linear) against slope 2 (quadratic)
                ax.set_xscale(scale)
                ax.set_yscale(scale)
                if not use_log:
                    ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
            ax.set_xlim(1, max(settings.T, 2))
            ax.set_ylim(bottom, top)
        return self.png()


class CacheCostExplorer(Explorer):
    """The widget: controls, the figure as an ``ipywidgets.Image`` and a summary line.

    Parameters
    ----------
    cost_fn : callable
        ``attention_cost_per_token(t, d_model, d_head, cached) -> multiply-adds``.
    T : int
        Initial number of generated tokens, one of :data:`T_OPTIONS`.
    d_model, d_head : int
        Initial sizes, from :data:`D_MODEL_OPTIONS` and :data:`D_HEAD_OPTIONS`.
    log_scale : bool
        Logarithmic x- and y-axes.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If an initial value is not one of the offered options.
    """

    def __init__(self, cost_fn: Callable, *, T: int = 1024, d_model: int = 512, d_head: int = 64,
                 log_scale: bool = True, sync: bool = False):
        import ipywidgets as widgets

        offered = {"T": (T, T_OPTIONS), "d_model": (d_model, D_MODEL_OPTIONS), "d_head": (d_head, D_HEAD_OPTIONS)}
        check_settings(**{name: (value, value in options, f"one of {options}")
                          for name, (value, options) in offered.items()})
        super().__init__(CostFigure(), sync=sync)
        self.cost_fn = cost_fn
        choice = widgets.SelectionSlider
        self.T_slider = control(choice, "T (tokens)", T, "how many tokens are generated, one after the other",
                                options=T_OPTIONS)
        self.d_model_slider = control(choice, "d_model", d_model, "size of each token vector", options=D_MODEL_OPTIONS)
        self.d_head_slider = control(choice, "d_head", d_head, "size of the head's queries, keys, values",
                                     options=D_HEAD_OPTIONS)
        self.log_box = control(widgets.Checkbox, "logarithmic axes", log_scale,
                               "log-log axes: linear growth is a line of slope 1, quadratic growth a line of slope 2")
        self.start([[self.T_slider, self.d_model_slider], [self.d_head_slider, self.log_box]])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.T_slider.value, self.d_model_slider.value, self.d_head_slider.value,
                        self.log_box.value)

    def compute(self, settings: Settings) -> CostView:
        """The counts for ``settings`` (:func:`compute_view`)."""
        return compute_view(self.cost_fn, settings)


def explore_cache_cost(cost_fn: Callable, **settings):
    """Show the cost plot for a cost model (see :class:`CacheCostExplorer`), unless nbgrader is running.

    Returns
    -------
    CacheCostExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the cost plot", CacheCostExplorer, cost_fn, **settings)
