"""The positional-encoding explorer, and the static plots of assignment 3.

``explore_positional_encoding(sinusoidal_positional_encoding, dot_product_by_offset,
offset_rotation, self_attention, add_positions)`` shows, with controls for T,
d_model, a position t, an offset k, a frequency pair i and a random seed:

* the encoding table as a heatmap (position × dimension, fixed colour range
  −1…1), with rows t and t + k marked;
* PE(t)·PE(t+k) against the offset k for the chosen t and for t = 0 (the two
  curves coincide: the dot product depends on k only), next to the same curve
  for a random table (a stand-in for a learned encoding), which has no such structure;
* pair i of every position as a point on the unit circle (sine on the x axis,
  cosine on the y axis), PE(t), its image PE(t) @ R_k and the table's
  PE(t + k): moving k positions is the same rotation by k·ω_i whatever t is;
* for T random tokens shuffled by a random permutation, the gap
  |output(x[perm]) − output(x)[perm]| per position on a log axis, without and
  with positions added: rounding-level (≈ 1e-16) without, because
  self-attention is permutation-equivariant, and of order 1 with;
* one line of text stating the same numbers.

It runs on whatever functions it is given — the learner's own at the end of
assignment 3, the reference in the self-study notebook — and looks each one up
again by name before every redraw, so re-running a fixed solution cell is
picked up. A function that raises, hangs or returns the wrong shape or NaN
blanks only the panels that need it, with a one-line message.

Speed: one Agg figure is kept; its static parts (axes, ticks, labels, legends)
are drawn once per (T, d_model) and restored from a cached background,
and only the artists holding data are drawn on top (blitting) before the canvas
is encoded once into an ``ipywidgets.Image``. Changes that arrive while a
redraw is pending are merged into that redraw.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np
from matplotlib.axes import Axes

from attention_lab.core.explorer import (BACKGROUNDS_KEPT, DPI, TITLE_Y,
                                         Explorer, ExplorerError, ExplorerFigure, call_for_visual as _call,
                                         check_settings, control, error_html, function_name as _name, latest,
                                         unless_grading)
from attention_lab.core.plots import CURVE_COLOURS, SIGNED_COLORMAP, axes_or_new, checked_array, heatmap

ENCODING_COLORMAP = SIGNED_COLORMAP  # −1 dark blue, 0 grey, +1 light yellow: the ends differ in lightness too
T_MAX = 512
D_MODEL_MAX = 256
OFFSET_MAX = 128
D_HEAD = 8  # size of the attention head in the permutation panel
FIGURE_SIZE = (13.0, 3.7)  # inches at DPI dots per inch
# Where the panels are, in figure fractions: (left, bottom, width, height) each; tests find the panels there.
HEATMAP_RECT, COLORBAR_RECT = (0.045, 0.15, 0.17, 0.72), (0.222, 0.15, 0.008, 0.72)
DOT_RECT, CIRCLE_RECT, GAP_RECT = (0.325, 0.15, 0.19, 0.72), (0.565, 0.15, 0.165, 0.72), (0.8, 0.15, 0.19, 0.72)


def _real_array(function, value, shape: tuple[int, ...], what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.shape != shape:
        got = f"shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
        raise ExplorerError(f"{_name(function)} returned {what} of {got}; expected shape {shape}")
    if value.dtype.kind not in "fiu":
        raise ExplorerError(f"{_name(function)} returned {what} of dtype {value.dtype}; expected real numbers")
    bad = int(np.count_nonzero(~np.isfinite(value)))
    if bad:
        raise ExplorerError(f"{_name(function)} returned {bad} NaN or infinite value(s) in {what}")
    return value.astype(float, copy=False)


@dataclass(frozen=True)
class Settings:
    """One state of the controls."""

    T: int
    d_model: int
    t: int
    k: int
    pair: int
    seed: int


@dataclass
class View:
    """Everything drawn for one :class:`Settings`; a panel's data is None when its function failed.

    Attributes
    ----------
    pe : ndarray (T, d_model) or None
    dots, dots_from_zero : ndarray (T − t,), (T,) or None
        PE(t)·PE(t+k) for k = 0 … T−1−t, and the same from t = 0.
    learned_dots : ndarray (T − t,) or None
        The same for a random encoding of the same size.
    circle : ndarray (T, 2) or None
        Pair ``pair`` of every position: (sin, cos) columns 2i and 2i + 1.
    start, moved : ndarray (2,) or None
        Pair ``pair`` of PE(t), and of PE(t) @ R_k.
    rotation_error : float or None
        max |PE(t') @ R_k − PE(t' + k)| over every t' with 0 ≤ t' + k < T.
    gap_plain, gap_positions : ndarray (T,) or None
        Per position, max over columns of |output(x[perm]) − output(x)[perm]|, without and with positions.
    errors : list of str
    summary : str
    """

    pe: np.ndarray | None = None
    dots: np.ndarray | None = None
    dots_from_zero: np.ndarray | None = None
    learned_dots: np.ndarray | None = None
    circle: np.ndarray | None = None
    start: np.ndarray | None = None
    moved: np.ndarray | None = None
    rotation_error: float | None = None
    gap_plain: np.ndarray | None = None
    gap_positions: np.ndarray | None = None
    errors: list[str] = field(default_factory=list)
    summary: str = ""


def learned_encoding(T: int, d_model: int, seed: int) -> np.ndarray:
    """A random (T, d_model) table standing in for a learned encoding, each row of length √(d_model / 2).

    Sinusoidal rows have that length too (each of the d_model/2 pairs contributes
    sin² + cos² = 1), so both kinds of dot products lie in [−d_model/2, d_model/2]
    and share the panel's scale.

    Parameters
    ----------
    T, d_model : int
        Size of the table, ≥ 1.
    seed : int
        Seed of the local random generator; the same seed gives the same table.

    Returns
    -------
    numpy.ndarray, shape (T, d_model), float64
    """
    rows = np.random.default_rng(10_000 + seed).standard_normal((T, d_model))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True) * math.sqrt(d_model / 2)


def attention_problem(T: int, d_model: int, seed: int):
    """Random inputs for the permutation panel: tokens, three projections and a shuffle.

    The projections' scale 1.5/√d_model keeps the scores at a few units, so the
    softmax is neither flat nor one-hot.

    Parameters
    ----------
    T, d_model : int
        Number of tokens and their size, ≥ 1.
    seed : int
        Seed of the local random generator.

    Returns
    -------
    x : numpy.ndarray, shape (T, d_model), entries ~ N(0, 1)
    W_q, W_k, W_v : numpy.ndarray, shape (d_model, D_HEAD), entries ~ N(0, 1.5² / d_model)
    perm : numpy.ndarray of int, shape (T,)
        A random permutation of 0 … T−1.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d_model))
    W_q, W_k, W_v = (rng.normal(0.0, 1.5 / math.sqrt(d_model), (d_model, D_HEAD)) for _ in range(3))
    return x, W_q, W_k, W_v, rng.permutation(T)


def _dot_panel(dot_fn, pe, learned, t):
    T = pe.shape[0]
    dots = _real_array(dot_fn, _call(dot_fn, pe, t), (T - t,), f"dot products for t = {t}")
    from_zero = _real_array(dot_fn, _call(dot_fn, pe, 0), (T,), "dot products for t = 0")
    learned_dots = _real_array(dot_fn, _call(dot_fn, learned, t), (T - t,), "dot products of the learned encoding")
    return dots, from_zero, learned_dots


def _rotation_panel(rotation_fn, pe, t, k, pair):
    T, d_model = pe.shape
    R = _real_array(rotation_fn, _call(rotation_fn, k, d_model), (d_model, d_model), f"R_{k}")
    moved_rows = pe @ R
    valid = np.arange(T)
    valid = valid[(valid + k >= 0) & (valid + k < T)]
    error = float(np.max(np.abs(moved_rows[valid] - pe[valid + k]))) if valid.size else None
    columns = slice(2 * pair, 2 * pair + 2)
    return pe[:, columns], pe[t, columns], moved_rows[t, columns], error


def _attend(self_attention_fn, z, W_q, W_k, W_v, T):
    result = _call(self_attention_fn, z, W_q, W_k, W_v)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ExplorerError(f"{_name(self_attention_fn)} should return (output, weights); it returned "
                            f"{type(result).__name__}")
    return _real_array(self_attention_fn, result[0], (T, D_HEAD), "an output")


def _gap_panel(self_attention_fn, add_positions_fn, T, d_model, seed):
    x, W_q, W_k, W_v, perm = attention_problem(T, d_model, seed)
    plain = np.abs(_attend(self_attention_fn, x[perm], W_q, W_k, W_v, T)
                   - _attend(self_attention_fn, x, W_q, W_k, W_v, T)[perm]).max(axis=1)
    encoded = _real_array(add_positions_fn, _call(add_positions_fn, x), (T, d_model), "x + PE")
    encoded_shuffled = _real_array(add_positions_fn, _call(add_positions_fn, x[perm]), (T, d_model), "x[perm] + PE")
    with_positions = np.abs(_attend(self_attention_fn, encoded_shuffled, W_q, W_k, W_v, T)
                            - _attend(self_attention_fn, encoded, W_q, W_k, W_v, T)[perm]).max(axis=1)
    return plain, with_positions


def compute_view(functions, settings: Settings, gaps: dict | None = None) -> View:
    """The data of every panel and the summary line for one setting of the controls.

    Parameters
    ----------
    functions : tuple of callables
        ``(sinusoidal_positional_encoding, dot_product_by_offset, offset_rotation, self_attention, add_positions)``.
    settings : Settings
    gaps : dict, optional
        The gap panel's data kept from the last view, keyed by what it depends on (T, d_model, seed and the
        current definitions of ``self_attention`` and ``add_positions``): reused when t, k or the pair change
        (four self-attention calls, most of a redraw at T = 512), replaced otherwise; updated in place.

    Returns
    -------
    View
        Panels whose function failed hold None and their message is in ``errors``.
    """
    encoding_fn, dot_fn, rotation_fn, self_attention_fn, add_positions_fn = functions
    s = settings
    view = View()
    try:
        view.pe = _real_array(encoding_fn, _call(encoding_fn, s.T, s.d_model), (s.T, s.d_model),
                              f"an encoding for T = {s.T}, d_model = {s.d_model}")
    except ExplorerError as error:
        view.errors.append(str(error))
    if view.pe is not None:
        for panel in ("dots", "rotation"):
            try:
                if panel == "dots":
                    view.dots, view.dots_from_zero, view.learned_dots = _dot_panel(
                        dot_fn, view.pe, learned_encoding(s.T, s.d_model, s.seed), s.t)
                else:
                    view.circle, view.start, view.moved, view.rotation_error = _rotation_panel(
                        rotation_fn, view.pe, s.t, s.k, s.pair)
            except ExplorerError as error:
                view.errors.append(str(error))
    key = (s.T, s.d_model, s.seed, latest(self_attention_fn), latest(add_positions_fn))
    try:
        if gaps is not None and key in gaps:
            view.gap_plain, view.gap_positions = gaps[key]
        else:
            view.gap_plain, view.gap_positions = _gap_panel(self_attention_fn, add_positions_fn, s.T, s.d_model,
                                                            s.seed)
            if gaps is not None:
                gaps.clear()
                gaps[key] = (view.gap_plain, view.gap_positions)
    except ExplorerError as error:
        view.errors.append(str(error))
    view.summary = summary(view, s)
    return view


def summary(view: View, s: Settings) -> str:
    """The line of text under the figure, in plain words, for the panels that could be computed.

    Parameters
    ----------
    view : View
    s : Settings

    Returns
    -------
    str
        Parts separated by " · ": the sizes, the dot-product curve, the rotation, the permutation gaps.
    """
    parts = [f"T = {s.T}, d_model = {s.d_model}"]
    if view.dots is not None:
        stays = np.allclose(view.dots, view.dots_from_zero[: view.dots.size], rtol=1e-6, atol=1e-9)
        parts.append(f"PE({s.t})·PE({s.t}+k) runs from {view.dots[0]:.2f} (k = 0; d_model/2 = {s.d_model / 2:g}) "
                     f"down to {view.dots.min():.2f}, "
                     + ("the same curve as from t = 0" if stays else "not the same curve as from t = 0"))
    if view.start is not None:
        omega = abs(math.atan2(view.circle[1, 0], view.circle[1, 1])) if s.T > 1 else float("nan")
        text = (f"pair {s.pair} turns by ω = {omega:.4g} rad per position, so k = {s.k} turns it by "
                f"{s.k * omega:.4g} rad")
        if view.rotation_error is not None:
            text += f"; PE(t) R_k − PE(t+k) is at most {view.rotation_error:.1e} over every t"
        parts.append(text)
    if view.gap_plain is not None:
        parts.append(f"shuffled tokens: largest gap {view.gap_plain.max():.1e} without positions, "
                     f"{view.gap_positions.max():.3f} with positions")
    return " · ".join(parts)


# ---------------------------------------------------------------- static plots for the notebook
def plot_encoding(pe, ax: Axes | None = None, title: str = "positional encodings") -> Axes:
    """Draw a (T, d_model) encoding table as a heatmap: rows are positions, columns dimensions, colours −1…1.

    Parameters
    ----------
    pe : array_like, shape (T, d_model), float
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str
        Above the heatmap.

    Returns
    -------
    matplotlib.axes.Axes
        With a colour bar labelled "value", on :data:`~attention_lab.core.plots.SIGNED_COLORMAP` (its ends differ in lightness).

    Raises
    ------
    ValueError
        If ``pe`` is not 2-D.
    """
    return heatmap(checked_array(pe, 2, "pe", "(T, d_model)"), ax, title=title, cmap=ENCODING_COLORMAP,
                   limits=(-1.0, 1.0), labels=("dimension (even: sin, odd: cos)", "position", "value"), size=(4.6, 3.4))


def plot_dot_products(curves: dict[str, np.ndarray], ax: Axes | None = None,
                      title: str = "PE(t)·PE(t+k)") -> Axes:
    """Plot dot-product curves against the offset k (curve[k] for k = 0, 1, …).

    Parameters
    ----------
    curves : dict of str to array_like, shape (n,)
        Legend label → values at k = 0 … n−1.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str
        Above the curves.

    Returns
    -------
    matplotlib.axes.Axes
        Offset across, dot product up, with a line at 0 and a legend.

    Raises
    ------
    ValueError
        If a curve is not 1-D.
    """
    ax = axes_or_new(ax, (4.6, 3.4))
    styles = zip(("-", "--", ":", "-.") * len(curves), CURVE_COLOURS * len(curves))
    for (label, values), (style, colour) in zip(curves.items(), styles):
        values = np.asarray(values, dtype=float)
        if values.ndim != 1:
            raise ValueError(f"curve {label!r} must be 1-D; received shape {values.shape}")
        ax.plot(np.arange(values.size), values, linestyle=style, color=colour, label=label)
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_xlabel("offset k (positions)")
    ax.set_ylabel("dot product")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    return ax


def plot_pair_circle(pe, pair: int, t: int | None = None, moved=None, ax: Axes | None = None) -> Axes:
    """Pair ``pair`` (columns 2i, 2i + 1) of every row of ``pe`` as points in the plane, with the unit circle.

    Parameters
    ----------
    pe : array_like, shape (T, d_model), float
    pair : int
        i, with 0 ≤ 2i + 1 < d_model.
    t : int, optional
        A position to highlight.
    moved : array_like, shape (2,), optional
        Pair i of PE(t) @ R_k, drawn with an arrow from PE(t).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``pe`` is not 2-D or has no column pair ``pair``.
    """
    pe = np.asarray(pe, dtype=float)
    if pe.ndim != 2 or not 0 <= 2 * pair + 1 < pe.shape[1]:
        raise ValueError(f"pe must have shape (T, d_model) with a column pair {pair}; received shape {pe.shape}")
    ax = axes_or_new(ax, (3.6, 3.6))
    angle = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.sin(angle), np.cos(angle), color="0.8", lw=1)
    points = ax.scatter(pe[:, 2 * pair], pe[:, 2 * pair + 1], c=np.arange(pe.shape[0]), cmap="viridis", s=12)
    ax.figure.colorbar(points, ax=ax, label="position t")
    if t is not None:
        ax.plot(*pe[t, 2 * pair:2 * pair + 2], "o", color="#D55E00", ms=9, mfc="none", mew=2, label=f"PE({t})")
    if t is not None and moved is not None:
        ax.annotate("", xy=tuple(moved), xytext=tuple(pe[t, 2 * pair:2 * pair + 2]),
                    arrowprops={"arrowstyle": "->", "color": "#D55E00"})
        ax.plot(*moved, "s", color="#D55E00", ms=7, label="PE(t) @ R_k")
    ax.set_aspect("equal")
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.25, 1.25)
    ax.set_xlabel(f"sin (column {2 * pair})")
    ax.set_ylabel(f"cos (column {2 * pair + 1})")
    ax.set_title(f"pair {pair}")
    if t is not None:
        ax.legend(loc="lower right", fontsize="small")
    return ax


# ---------------------------------------------------------------- the live figure
GAP_FLOOR = 1e-17  # a gap of exactly 0 is drawn here, at the bottom of the log axis
GAP_LIMITS = (GAP_FLOOR / 3, 1e2)


class PositionalFigure(ExplorerFigure):
    """The four panels, redrawn by blitting.

    Static parts (axes, ticks, labels, legends, colour bar) are drawn by
    :meth:`layout` once per (T, d_model) and cached; :meth:`update`
    restores them and draws only the artists that hold data.
    """

    def __init__(self):
        super().__init__(FIGURE_SIZE, backgrounds_kept=BACKGROUNDS_KEPT)
        self.heat_ax = self.figure.add_axes(HEATMAP_RECT)
        self.image = self.heat_ax.imshow(np.zeros((2, 2)), cmap=ENCODING_COLORMAP, vmin=-1.0, vmax=1.0,
                                         interpolation="nearest", aspect="auto", animated=True)
        self.row_lines = [self.heat_ax.axhline(0, color="0.1", lw=1.0, ls=style, animated=True)
                          for style in ("-", "--")]
        self.heat_ax.set_xlabel("dimension (even: sin, odd: cos)")
        self.heat_ax.set_ylabel("position")
        self.heat_ax.set_title("encodings PE(t); rows t, t + k", fontsize=10, y=TITLE_Y)
        self.figure.colorbar(self.image, cax=self.figure.add_axes(COLORBAR_RECT))

        self.dot_ax = self.figure.add_axes(DOT_RECT)
        (self.dot_line,) = self.dot_ax.plot([], [], color=CURVE_COLOURS[0], lw=1.6, label="from position t", animated=True)
        (self.zero_line,) = self.dot_ax.plot([], [], color=CURVE_COLOURS[1], lw=1.2, ls="--", label="from t = 0",
                                             animated=True)
        (self.learned_line,) = self.dot_ax.plot([], [], color=CURVE_COLOURS[2], lw=1.0, ls=":", label="random table",
                                                animated=True)
        self.dot_ax.axhline(0.0, color="0.8", lw=0.8)
        self.dot_ax.set_xlabel("offset k (positions)")
        self.dot_ax.set_ylabel("PE(t)·PE(t+k)")
        self.dot_ax.set_title("dot product by offset", fontsize=10, y=TITLE_Y)
        self.dot_ax.legend(loc="upper right", fontsize="x-small")

        self.circle_ax = self.figure.add_axes(CIRCLE_RECT)
        angle = np.linspace(0, 2 * np.pi, 200)
        self.circle_ax.plot(np.sin(angle), np.cos(angle), color="0.85", lw=1)
        self.points = self.circle_ax.scatter(np.zeros(1), np.zeros(1), s=6, c=[0.0], cmap="viridis", vmin=0, vmax=1,
                                             animated=True)
        (self.start_marker,) = self.circle_ax.plot([], [], "o", color="#D55E00", ms=9, mfc="none", mew=2,
                                                   label="PE(t)", animated=True)
        (self.moved_marker,) = self.circle_ax.plot([], [], "s", color="#D55E00", ms=6, label="PE(t) @ R_k",
                                                   animated=True)
        (self.target_marker,) = self.circle_ax.plot([], [], "x", color="0.1", ms=9, mew=1.5, label="PE(t+k)",
                                                    animated=True)
        (self.arc,) = self.circle_ax.plot([], [], color="#D55E00", lw=1.2, animated=True)
        self.circle_title = self.circle_ax.text(0.5, 1.03, "rotation", transform=self.circle_ax.transAxes,
                                                ha="center", va="bottom", fontsize=10, animated=True)
        self.circle_ax.set_aspect("equal")
        self.circle_ax.set_xlim(-1.3, 1.3)
        self.circle_ax.set_ylim(-1.55, 1.3)  # room for the legend below the circle
        self.circle_ax.set_xlabel("sin (column 2i)")
        self.circle_ax.set_ylabel("cos (column 2i + 1)")
        self.circle_ax.legend(loc="lower center", fontsize="x-small", ncol=3, handletextpad=0.2, columnspacing=0.6)

        self.gap_ax = self.figure.add_axes(GAP_RECT)
        (self.gap_plain_line,) = self.gap_ax.plot([], [], color=CURVE_COLOURS[0], lw=1.4, marker=".", ms=3,
                                                  label="without positions", animated=True)
        (self.gap_positions_line,) = self.gap_ax.plot([], [], color=CURVE_COLOURS[1], lw=1.4, marker=".", ms=3,
                                                      label="with positions", animated=True)
        self.gap_ax.set_yscale("log")
        self.gap_ax.set_ylim(*GAP_LIMITS)
        self.gap_ax.set_xlabel("position")
        self.gap_ax.set_ylabel("|out(x[perm]) − out(x)[perm]|")
        self.gap_ax.set_title("shuffled tokens: gap (log scale)", fontsize=10, y=TITLE_Y)
        self.gap_ax.legend(loc="upper center", fontsize="x-small", ncol=2)

        self.animated = [self.image, *self.row_lines, self.dot_line, self.zero_line, self.learned_line, self.points,
                         self.arc, self.start_marker, self.moved_marker, self.target_marker, self.circle_title,
                         self.gap_plain_line, self.gap_positions_line]

    def layout(self, T: int, d_model: int) -> None:
        """Set the limits that depend on T and d_model, draw the static parts and cache them.

        Parameters
        ----------
        T, d_model : int
            The size of the encoding table on screen.
        """
        self.heat_ax.set_xlim(-0.5, d_model - 0.5)
        self.heat_ax.set_ylim(T - 0.5, -0.5)
        limit = d_model / 2  # |PE(t)·PE(t+k)| ≤ |PE(t)| |PE(t+k)| = d_model / 2, for both tables (Cauchy–Schwarz)
        self.dot_ax.set_xlim(0, max(T - 1, 1))
        self.dot_ax.set_ylim(-1.05 * limit, 1.6 * limit)  # the band above the curves holds the legend
        self.gap_ax.set_xlim(-0.5, T - 0.5)
        self.cache_background((T, d_model))

    def update(self, s: Settings, view: View) -> bytes:
        """Draw ``view`` onto the cached background and return the figure as PNG bytes.

        Parameters
        ----------
        s : Settings
        view : View
            Panels whose data is None are drawn empty.

        Returns
        -------
        bytes
            The whole figure as a PNG image.
        """
        if self.layout_key != (s.T, s.d_model):
            self.layout(s.T, s.d_model)
        self._heatmap(s, view)
        self._dots(view)
        self._circle(s, view)
        self._gaps(s, view)
        return self.blit(self.animated)

    def _heatmap(self, s: Settings, view: View) -> None:
        data = view.pe if view.pe is not None else np.full((s.T, s.d_model), np.nan)
        self.image.set_data(data)
        self.image.set_extent((-0.5, s.d_model - 0.5, s.T - 0.5, -0.5))
        for line, row in zip(self.row_lines, (s.t, s.t + s.k)):
            line.set_ydata([row, row])
            line.set_visible(view.pe is not None and 0 <= row < s.T)

    def _dots(self, view: View) -> None:
        for line, values in ((self.dot_line, view.dots), (self.zero_line, view.dots_from_zero),
                             (self.learned_line, view.learned_dots)):
            line.set_data(([], []) if values is None else (np.arange(values.size), values))

    def _circle(self, s: Settings, view: View) -> None:
        if view.circle is None:
            self.points.set_offsets(np.empty((0, 2)))
            for artist in (self.start_marker, self.moved_marker, self.target_marker, self.arc):
                artist.set_data([], [])
            self.circle_title.set_text("rotation")
            return
        self.points.set_offsets(view.circle)
        self.points.set_array(np.arange(s.T) / max(s.T - 1, 1))
        self.start_marker.set_data([view.start[0]], [view.start[1]])
        self.moved_marker.set_data([view.moved[0]], [view.moved[1]])
        target = s.t + s.k
        inside = 0 <= target < s.T
        self.target_marker.set_data(([view.circle[target, 0]], [view.circle[target, 1]]) if inside else ([], []))
        a, b = (math.atan2(p[0], p[1]) for p in (view.start, view.moved))
        turn = (b - a + math.pi) % (2 * math.pi) - math.pi  # the short way round, as the arrow of the rotation
        arc = a + np.linspace(0.0, turn, 40)
        self.arc.set_data(0.85 * np.sin(arc), 0.85 * np.cos(arc))
        self.circle_title.set_text(f"pair {s.pair} (columns {2 * s.pair}, {2 * s.pair + 1}), k = {s.k}")

    def _gaps(self, s: Settings, view: View) -> None:
        for line, values in ((self.gap_plain_line, view.gap_plain), (self.gap_positions_line, view.gap_positions)):
            line.set_data(([], []) if values is None else (np.arange(s.T), np.maximum(values, GAP_FLOOR)))


class PositionalExplorer(Explorer):
    """The widget: controls, the figure as an ``ipywidgets.Image`` and a summary line.

    Parameters
    ----------
    sinusoidal_positional_encoding : callable
        ``(T, d_model) -> (T, d_model)``.
    dot_product_by_offset : callable
        ``(pe (T, d), t) -> (T − t,)``.
    offset_rotation : callable
        ``(k, d_model) -> (d_model, d_model)`` with PE(t + k) = PE(t) @ R_k.
    self_attention : callable
        ``(x, W_q, W_k, W_v) -> (output (T, d_head), weights (T, T))``, unmasked.
    add_positions : callable
        ``x (T, d_model) -> x + PE``.
    T, d_model, t, k, pair, seed : int
        Initial values: 2 ≤ T ≤ 512, d_model even in [2, 256], 0 ≤ t < T, |k| ≤ 128,
        0 ≤ pair < d_model / 2, 0 ≤ seed ≤ 99.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If an initial value is out of range.
    """

    def __init__(self, sinusoidal_positional_encoding, dot_product_by_offset, offset_rotation, self_attention,
                 add_positions, *, T=64, d_model=32, t=8, k=5, pair=2, seed=0, sync=False):
        import ipywidgets as widgets

        check_settings(T=(T, 2 <= T <= T_MAX, f"between 2 and {T_MAX}"),
                       d_model=(d_model, 2 <= d_model <= D_MODEL_MAX and d_model % 2 == 0,
                                f"an even number between 2 and {D_MODEL_MAX}"),
                       t=(t, 0 <= t < T, f"a position in [0, {T - 1}]"),
                       k=(k, -OFFSET_MAX <= k <= OFFSET_MAX, f"between {-OFFSET_MAX} and {OFFSET_MAX}"),
                       pair=(pair, 0 <= pair < d_model // 2, f"in [0, {d_model // 2 - 1}] (d_model / 2 pairs)"),
                       seed=(seed, 0 <= seed <= 99, "between 0 and 99"))
        super().__init__(PositionalFigure(), sync=sync)
        self._gaps: dict = {}  # the gap panel's data for the last (T, d_model, seed, functions): compute_view
        self.functions = (sinusoidal_positional_encoding, dot_product_by_offset, offset_rotation, self_attention,
                          add_positions)
        slider = widgets.IntSlider
        self.T_slider = control(slider, "T", T, "number of positions (rows of the encoding table)", min=2, max=T_MAX)
        self.d_slider = control(slider, "d_model", d_model, "size of each encoding (even: sin/cos pairs)",
                                min=2, max=D_MODEL_MAX, step=2)
        self.t_slider = control(slider, "position t", t, "the position whose dot products and rotation are shown",
                                min=0, max=T - 1)
        self.k_slider = control(slider, "offset k", k, "move PE(t) by k positions with R_k",
                                min=-OFFSET_MAX, max=OFFSET_MAX)
        self.pair_slider = control(slider, "pair i", pair, "the frequency pair (columns 2i, 2i + 1) on the circle; "
                                   "higher pairs turn slower", min=0, max=d_model // 2 - 1)
        self.seed_slider, self.shuffle = self.seed_controls(
            seed, "random tokens, projections and shuffle for the gap panel", "shuffle",
            "new random tokens and permutation (next seed)")
        # t and pair must stay inside the new table when its size changes
        self.start([[self.T_slider, self.d_slider, self.t_slider],
                    [self.k_slider, self.pair_slider, self.seed_slider, self.shuffle]],
                   follow=[(self.T_slider, lambda T: setattr(self.t_slider, "max", T - 1)),
                           (self.d_slider, lambda d: setattr(self.pair_slider, "max", d // 2 - 1))])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.T_slider.value, self.d_slider.value, self.t_slider.value, self.k_slider.value,
                        self.pair_slider.value, self.seed_slider.value)

    def compute(self, settings: Settings) -> View:
        """Every panel's data for ``settings`` (:func:`compute_view`); a failing panel only holds a message."""
        return compute_view(self.functions, settings, self._gaps)

    def summary_html(self, view: View) -> str:
        """The summary line, then one red line per panel that could not be computed."""
        return "<br>".join([html.escape(view.summary)] + [error_html(html.escape(error)) for error in view.errors])

    def render(self, settings: Settings) -> bytes:
        """The four panels for ``settings`` as PNG bytes."""
        return self.figure.update(settings, self.view)


def explore_positional_encoding(sinusoidal_positional_encoding, dot_product_by_offset, offset_rotation,
                                self_attention, add_positions, **settings):
    """Show the positional-encoding explorer for these functions (see :class:`PositionalExplorer`).

    Returns
    -------
    PositionalExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the positional-encoding explorer", PositionalExplorer, sinusoidal_positional_encoding,
                          dot_product_by_offset, offset_rotation, self_attention, add_positions, **settings)
