"""The tile explorer: which tiles of the score matrix tiled attention computes, masks or skips.

``explore_tiles(tile_schedule)`` draws the (T_q, T_k) score matrix over (query position, key
position), cut into tiles of ``block_q`` × ``block_k`` (the last ones narrower when a block size does
not divide T), each coloured by the given ``tile_schedule`` — the learner's own at the end of
assignment 7, the reference in the self-study notebook: skipped, masked (the diagonal crosses it) or
full. Under the causal mask the bottom-right diagonal (query i sees keys up to i + T_k − T_q) is
drawn on top. The summary says how many tiles are computed, what fraction of the T_q · T_k scores
they hold (→ ½ for causal self-attention as the tiles shrink), and how many of those are computed
only to be masked (→ 0 as the tiles shrink, at the price of more tiles, each a step of the loop).

Controls: T_q, T_k, block_q, block_k and the causal switch. The schedule function is looked up
again by name before every redraw, so re-running a fixed cell is picked up; one that raises, hangs
or returns a wrong array is reported in one line instead of a picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch

from attention_lab.core.plots import CURVE_COLOURS
from attention_lab.core.explorer import (TITLE_Y, Explorer, ExplorerError, ExplorerFigure, call_for_visual,
                                         check_settings, control, unless_grading)

T_MAX, BLOCK_MAX = 512, 128
FIGURE_SIZE = (8.4, 5.6)  # inches at DPI dots per inch
AXES_RECT = (0.09, 0.1, 0.56, 0.8)
#: skipped, masked, full: near-white and two of :data:`attention_lab.core.plots.CURVE_COLOURS` (viridis samples), at
#: least 20 apart in CIELAB lightness from each other and from the black mask edge, also under simulated colour-vision
#: deficiency (tests/test_colour_contrast.py), so that they stay apart in greyscale
COLOURS = ("#F7F7F7", CURVE_COLOURS[1], CURVE_COLOURS[0])
NAMES = ("skipped", "masked (the diagonal crosses it)", "full (no mask needed)")


class ScheduleError(ExplorerError):
    """The schedule function given to the explorer failed or returned something other than a tile array."""


@dataclass(frozen=True)
class Settings:
    """One state of the controls."""

    T_q: int
    T_k: int
    block_q: int
    block_k: int
    causal: bool


@dataclass
class TileView:
    """Everything drawn for one :class:`Settings`.

    Attributes
    ----------
    schedule : ndarray of int, shape (ceil(T_q / block_q), ceil(T_k / block_k))
        0 skipped, 1 masked, 2 full, as the schedule function returned it.
    computed_tiles : int
        Tiles that are not skipped.
    computed_scores : int
        Scores inside those tiles.
    allowed_scores : int
        Scores the mask allows (T_q · T_k without it).
    summary : str
    """

    schedule: np.ndarray
    computed_tiles: int
    computed_scores: int
    allowed_scores: int
    summary: str


def _edges(T: int, block: int) -> np.ndarray:
    """Block boundaries 0, block, 2·block, …, T (the last block may be shorter)."""
    return np.append(np.arange(0, T, block), T)


def allowed_scores(T_q: int, T_k: int, causal: bool) -> int:
    """How many of the T_q · T_k scores the bottom-right causal mask allows (all of them without the mask)."""
    if not causal:
        return T_q * T_k
    offset = T_k - T_q
    return int(sum(min(i + offset + 1, T_k) for i in range(T_q)))


def compute_view(tile_schedule: Callable, settings: Settings) -> TileView:
    """The schedule for one setting of the controls, checked, and the summary line.

    Raises
    ------
    ScheduleError
        If the schedule function raises (a ValueError for T_q > T_k under the mask is the right answer,
        and shown as such), hangs, or returns something other than an integer array of shape
        (ceil(T_q / block_q), ceil(T_k / block_k)) holding 0, 1 and 2.
    """
    s = settings
    if s.causal and s.T_q > s.T_k:
        try:
            call_for_visual(tile_schedule, s.T_q, s.T_k, s.block_q, s.block_k, s.causal)
        except ExplorerError as error:
            if "ValueError" in str(error):
                raise ScheduleError(f"T_q = {s.T_q} > T_k = {s.T_k} under the causal mask: the first queries would "
                                    "see no key, and tile_schedule refuses these sizes (ValueError), as it should")
            raise ScheduleError(str(error)) from None
        raise ScheduleError(f"tile_schedule({s.T_q}, {s.T_k}, {s.block_q}, {s.block_k}, True) returned a schedule "
                            "for T_q > T_k under the causal mask; it should raise ValueError")
    schedule = call_for_visual(tile_schedule, s.T_q, s.T_k, s.block_q, s.block_k, s.causal)
    shape = (-(-s.T_q // s.block_q), -(-s.T_k // s.block_k))
    call = f"tile_schedule({s.T_q}, {s.T_k}, {s.block_q}, {s.block_k}, {s.causal})"
    if not isinstance(schedule, np.ndarray) or schedule.shape != shape:
        got = f"shape {schedule.shape}" if isinstance(schedule, np.ndarray) else type(schedule).__name__
        raise ScheduleError(f"{call} returned {got}; expected an array of shape (ceil(T_q / block_q), "
                            f"ceil(T_k / block_k)) = {shape}")
    if schedule.dtype.kind not in "iu" or not np.isin(schedule, (0, 1, 2)).all():
        raise ScheduleError(f"{call} should hold only the integers 0 (skipped), 1 (masked) and 2 (full)")
    heights = np.diff(_edges(s.T_q, s.block_q))[:, None]
    widths = np.diff(_edges(s.T_k, s.block_k))[None, :]
    computed = schedule > 0
    computed_scores = int((heights * widths)[computed].sum())
    allowed = allowed_scores(s.T_q, s.T_k, s.causal)
    total = s.T_q * s.T_k
    summary = (f"{int(computed.sum())} of {schedule.size} tiles computed ({int((schedule == 1).sum())} masked, "
               f"{int((schedule == 2).sum())} full, {int((schedule == 0).sum())} skipped); they hold "
               f"{computed_scores:,} of the {total:,} scores ({computed_scores / total:.0%})")
    if s.causal:
        summary += (f"; the mask allows {allowed:,} ({allowed / total:.0%}), so {max(computed_scores - allowed, 0):,} "
                    "scores are computed only to be masked")
    return TileView(schedule, int(computed.sum()), computed_scores, allowed, summary + ".")


class TileFigure(ExplorerFigure):
    """The tile map, redrawn whole for each view (its grid changes with every block size)."""

    def __init__(self):
        super().__init__(FIGURE_SIZE)
        self.ax = self.figure.add_axes(AXES_RECT)
        self.cmap = ListedColormap(COLOURS)
        self.norm = BoundaryNorm([-0.5, 0.5, 1.5, 2.5], self.cmap.N)

    def render(self, settings: Settings, view: TileView | None) -> bytes:
        """Draw one view (an empty square when ``view`` is None) and return the figure as PNG bytes."""
        ax, s = self.ax, settings
        ax.clear()
        if view is not None:
            ax.pcolormesh(_edges(s.T_k, s.block_k), _edges(s.T_q, s.block_q), view.schedule, cmap=self.cmap,
                          norm=self.norm, edgecolors="white" if view.schedule.size <= 4096 else "none", linewidth=0.6)
            if s.causal:
                offset = s.T_k - s.T_q
                # query i (the row band i … i + 1) sees keys 0 … i + offset: a staircase along x = i + offset + 1
                rows = np.arange(s.T_q)
                ax.plot(np.repeat(rows + offset + 1, 2), np.column_stack([rows, rows + 1]).ravel(), color="black",
                        lw=1.2, label="the causal mask's edge")
            handles = [Patch(color=c, label=n) for c, n in zip(COLOURS, NAMES)] + ax.get_lines()
            ax.legend(handles=handles, loc="upper left",
                      bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
        ax.set_xlim(0, s.T_k)
        ax.set_ylim(s.T_q, 0)  # query 0 at the top, as in the attention heatmaps
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.set_title(f"tiles of {s.block_q} × {s.block_k}, T_q = {s.T_q}, T_k = {s.T_k}"
                     + (", causal" if s.causal else ", no mask"), fontsize=10, y=TITLE_Y)
        return self.png()


class TileExplorer(Explorer):
    """The widget: T_q, T_k, block sizes and causality above the tile map and its summary.

    Parameters
    ----------
    tile_schedule : callable
        ``tile_schedule(T_q, T_k, block_q, block_k, causal)`` → int array of 0/1/2 per tile.
    T_q, T_k : int
        Initial numbers of queries and keys, 1 … :data:`T_MAX`.
    block_q, block_k : int
        Initial tile sizes, 1 … :data:`BLOCK_MAX`.
    causal : bool
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If T_q or T_k is not an integer from 1 to :data:`T_MAX`, block_q or block_k not one from 1 to
        :data:`BLOCK_MAX`, or causal not True or False; the message names the values allowed.
    """

    def __init__(self, tile_schedule: Callable, *, T_q: int = 100, T_k: int = 100, block_q: int = 16,
                 block_k: int = 12, causal: bool = True, sync: bool = False):
        import ipywidgets as widgets

        check_settings(**{name: (value, isinstance(value, int) and 1 <= value <= top, f"an integer from 1 to {top}")
                          for name, value, top in (("T_q", T_q, T_MAX), ("T_k", T_k, T_MAX), ("block_q", block_q,
                                                   BLOCK_MAX), ("block_k", block_k, BLOCK_MAX))},
                       causal=(causal, isinstance(causal, bool), "True or False"))
        super().__init__(TileFigure(), sync=sync)
        self.tile_schedule = tile_schedule
        self.T_q_slider = control(widgets.IntSlider, "T_q (queries)", T_q, "number of queries", min=1, max=T_MAX)
        self.T_k_slider = control(widgets.IntSlider, "T_k (keys)", T_k, "number of keys", min=1, max=T_MAX)
        self.block_q_slider = control(widgets.IntSlider, "block_q", block_q, "queries per tile", min=1, max=BLOCK_MAX)
        self.block_k_slider = control(widgets.IntSlider, "block_k", block_k, "keys per tile", min=1, max=BLOCK_MAX)
        self.causal_box = control(widgets.Checkbox, "causal", causal,
                                  "the causal mask, bottom-right: query i sees keys up to i + T_k − T_q")
        self.start([[self.T_q_slider, self.T_k_slider], [self.block_q_slider, self.block_k_slider, self.causal_box]])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.T_q_slider.value, self.T_k_slider.value, self.block_q_slider.value,
                        self.block_k_slider.value, self.causal_box.value)

    def compute(self, settings: Settings) -> TileView:
        """The schedule for ``settings`` (:func:`compute_view`)."""
        return compute_view(self.tile_schedule, settings)


def explore_tiles(tile_schedule: Callable, **settings):
    """Show the tile explorer for a schedule function (see :class:`TileExplorer`), unless nbgrader is running.

    Returns
    -------
    TileExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the tile explorer", TileExplorer, tile_schedule, **settings)
