"""The masking explorer: padding and causal masks, fully masked rows and dtypes, on a batch of three sequences.

``explore_masking(padding_mask, causal_padding_mask, masked_softmax)`` draws,
for random scores of a chosen size and dtype:

* one heatmap of the attention weights per sequence, numbered 0, 1, 2 as the
  batch's rows (rows = query position, columns = key position, ``viridis`` in
  the chosen colour scale: logarithmic 10⁻⁴…1 by default, linear 0…1, or each
  row divided by its largest weight; the darkest fifth of viridis is left out),
  where a blocked entry with weight 0 is black, a blocked entry that still gets
  weight is pink, and a NaN or infinite weight is dark red — so a −1e9 fill lights
  up the rows of an empty sequence and an unguarded −inf fill turns them dark red;
* the largest |logit| against the overflow threshold of ``exp`` in each dtype,
  ln(largest finite number): 11.1 (float16), 88.7 (float32), 709.8 (float64);
* a plain-words summary (rows sum to 1, blocked keys at 0, what the fully
  masked rows became, NaNs, NumPy warnings, the dtype of the result) and a
  table of what −1e9, −inf and ``finfo(dtype).min`` become in the chosen dtype.

It runs on whatever functions it is given — the learner's own at the end of
assignment 4, the reference in the self-study notebook — and looks each one
up again by name before every redraw, so re-running a fixed solution cell is
picked up. One Agg figure is kept and redrawn in place, and shown as an
``ipywidgets.Image``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from attention_lab.core.explorer import (BACKGROUNDS_KEPT, DPI, TITLE_Y,
                                         ExplorerError, ExplorerFigure, HeatmapExplorer, HeatmapSettings,
                                         call_for_visual, check_settings, control, function_name as _name,
                                         unless_grading)
from attention_lab.core.plots import COLORMAP, COLOUR_SCALES, DEFAULT_COLOUR_SCALE, ColourScale, colour_scale_named

B = 3  # sequences in the batch: enough for "full", "padded" and "empty" side by side
T_MAX = 24
LOGIT_SIZES = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000)  # standard deviation of the random scores
DTYPES = ("float16", "float32", "float64")
# Blocked cells must stand out from every allowed weight in lightness (greyscale, colour-vision deficiency), so the
# allowed weights use viridis without its darkest fifth (CIELAB lightness ≥ 30) and a blocked zero is black (0);
# the three states of a blocked cell differ from each other by 25+ too (tests/test_colour_contrast.py).
ALLOWED_COLORMAP = ListedColormap(colormaps[COLORMAP](np.linspace(0.2, 1.0, 256)), name=f"{COLORMAP} from 0.2")
BLOCKED = to_rgba("#000000")  # blocked key with weight 0: the mask did its job
LEAK = to_rgba("#CC79A7")  # blocked key that still gets weight (Okabe–Ito reddish purple, lightness ≈ 60)
NOT_FINITE = to_rgba("#882255")  # NaN or infinite weight (Tol's wine, lightness ≈ 30)
CURRENT_DTYPE = "#004488"  # the bar of the chosen dtype (Tol's dark blue; the other bars are light grey)
FIGURE_SIZE = (12.0, 3.4)  # inches, at core.explorer.DPI dots per inch
# Axes rectangles in figure fractions (left, bottom, width, height); fixed so that tests can find cells in pixels.
HEATMAP_RECTS = tuple((0.045 + 0.19 * b, 0.15, 0.165, 0.66) for b in range(B))
COLORBAR_RECT = (0.625, 0.15, 0.008, 0.66)
OVERFLOW_RECT = (0.745, 0.15, 0.235, 0.66)

@dataclass(frozen=True)
class Settings(HeatmapSettings):
    """One state of the controls."""

    T: int
    lengths: tuple[int, ...]
    causal: bool
    dtype: str
    logit_size: float


@dataclass
class View:
    """The masking explorer's arrays for one :class:`Settings`: scores, the learner's mask, weights, outputs.

    Attributes
    ----------
    scores : ndarray, shape (B, T, T), the chosen dtype
    mask : ndarray of bool, shape (B, T, T) — the learner's mask, broadcast
    weights : ndarray, shape (B, T, T) — as returned (NaN kept)
    warnings : list of str — NumPy warnings emitted by the softmax
    summary : str
    """

    scores: np.ndarray
    mask: np.ndarray
    weights: np.ndarray
    warnings: list[str]
    summary: str


def overflow_threshold(dtype) -> float:
    """The largest x for which e^x is finite in ``dtype``: ln(largest finite number)."""
    return float(np.log(np.float64(np.finfo(dtype).max)))


def fill_values(dtype) -> dict[str, float]:
    """What common fills for blocked scores become in ``dtype`` (−1e9 is −inf in float16)."""
    kind = np.dtype(dtype).type
    with np.errstate(over="ignore"):  # the overflows are what the table shows
        return {"−1e9": float(np.array(-1e9).astype(kind)),
                "−inf": float(np.array(-np.inf).astype(kind)),
                "finfo(dtype).min": float(np.finfo(kind).min),
                "finfo(dtype).min − 16": float(np.finfo(kind).min - kind(16))}


def draw_scores(seed: int) -> np.ndarray:
    """Standard-normal scores of shape (B, T_MAX, T_MAX) from a local generator; every view scales and slices them."""
    return np.random.default_rng(seed).standard_normal((B, T_MAX, T_MAX))


def _call(function, *args):
    """``(result, warnings)`` of a learner's function on copies of its arrays (:func:`call_for_visual`)."""
    return call_for_visual(function, *args, record_warnings=True)


def _mask(padding_fn, causal_padding_fn, lengths: np.ndarray, T: int, causal: bool) -> np.ndarray:
    function = causal_padding_fn if causal else padding_fn
    expected = (B, T, T) if causal else (B, 1, T)
    mask, _ = _call(function, lengths, T)
    if not isinstance(mask, np.ndarray) or mask.shape != expected or mask.dtype != np.bool_:
        got = f"a {mask.dtype} array of shape {mask.shape}" if isinstance(mask, np.ndarray) else type(mask).__name__
        raise ExplorerError(f"{_name(function)}(lengths, T={T}) should return a bool array of shape {expected}; "
                           f"it returned {got}")
    return np.broadcast_to(mask, (B, T, T))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe(view_scores: np.ndarray, mask: np.ndarray, weights: np.ndarray, warned: list[str],
             settings: Settings) -> str:
    """The summary line (HTML): what the weights do right and wrong, in words."""
    dtype = np.dtype(settings.dtype)
    finite = np.isfinite(weights)
    empty = ~mask.any(axis=-1)  # (B, T): queries with no allowed key
    sums = np.where(finite, weights, 0.0).astype(np.float64).sum(axis=-1)
    row_ok = np.all(finite, axis=-1)
    tolerance = 5e-3 if weights.dtype == np.float16 else 1e-5
    bad_sums = int(np.count_nonzero(~empty & row_ok & (np.abs(sums - 1.0) > tolerance)))
    leaks = int(np.count_nonzero(~mask & finite & (weights != 0)))
    nan = int(np.count_nonzero(~finite))
    lengths = ", ".join(str(n) for n in settings.lengths)
    head = (f"lengths {lengths} of T = {settings.T} · {'causal + padding mask' if settings.causal else 'padding mask'}"
            f" · {dtype.name} scores of size ~{settings.logit_size:g}")
    parts = ["✓ rows with an allowed key sum to 1" if bad_sums == 0 else
             f"✗ {_plural(bad_sums, 'row')} with an allowed key {'does' if bad_sums == 1 else 'do'} not sum to 1",
             "✓ blocked keys have weight 0" if leaks == 0 else
             f"✗ {leaks} blocked {'entry gets' if leaks == 1 else 'entries get'} weight (pink)"]
    n_empty = int(empty.sum())
    if n_empty:
        rows = weights[empty]
        if not np.all(np.isfinite(rows)):
            parts.append(f"✗ the {_plural(n_empty, 'fully masked row')} {'is' if n_empty == 1 else 'are'} NaN (dark red): "
                         "0/0 from a −inf fill without a guard (in float16, −1e9 is −inf too)")
        elif np.all(rows == 0):
            parts.append(f"✓ the {_plural(n_empty, 'fully masked row')} {'is' if n_empty == 1 else 'are'} all zero")
        elif np.allclose(rows, 1.0 / settings.T, atol=1e-3):
            parts.append(f"✗ the {_plural(n_empty, 'fully masked row')} {'is' if n_empty == 1 else 'are'} uniform "
                         f"(1/{settings.T} on every key, pink): a finite fill such as −1e9")
        else:
            parts.append(f"✗ the {_plural(n_empty, 'fully masked row')} should be all zero")
    if nan and not (n_empty and nan == int(np.count_nonzero(~finite[empty]))):
        parts.append(f"✗ {_plural(nan, 'weight')} NaN or infinite (dark red): does exp overflow?")
    if weights.dtype != dtype:
        parts.append(f"✗ returned {weights.dtype.name} for {dtype.name} scores")
    if warned:
        parts.append(f"✗ NumPy warned: {warned[0]}" + (f" (+{len(warned) - 1} more)" if len(warned) > 1 else ""))
    largest = float(np.max(np.abs(view_scores.astype(np.float64))))
    threshold = overflow_threshold(dtype)
    naive = (f"a softmax without max subtraction overflows here: largest logit {largest:.4g} > "
             f"ln(max {dtype.name}) = {threshold:.1f}" if largest > threshold else
             f"largest logit {largest:.4g} < ln(max {dtype.name}) = {threshold:.1f}: even a naive softmax would not "
             "overflow")
    return f"{head}<br>{' · '.join(parts)}<br>{naive}"


def compute_view(padding_fn, causal_padding_fn, softmax_fn, settings: Settings, base_scores: np.ndarray) -> View:
    """Mask, scores, weights and summary for one setting of the controls.

    Raises
    ------
    ExplorerError
        If a function raises, or returns something other than the documented
        shapes and dtypes. NaN weights are not an error: they are drawn dark red.
    """
    T = settings.T
    lengths = np.array(settings.lengths, dtype=np.int64)
    mask = _mask(padding_fn, causal_padding_fn, lengths, T, settings.causal)
    with np.errstate(over="ignore"):  # float16 cannot hold every scaled score; out-of-range ones become ±inf
        scores = (base_scores[:, :T, :T] * settings.logit_size).astype(settings.dtype)
    weights, warned = _call(softmax_fn, scores, mask)
    if not isinstance(weights, np.ndarray) or weights.shape != (B, T, T):
        got = f"shape {weights.shape}" if isinstance(weights, np.ndarray) else type(weights).__name__
        raise ExplorerError(f"{_name(softmax_fn)}(scores, mask) returned {got}; expected the scores' shape {(B, T, T)}")
    if weights.dtype.kind not in "fiub":
        raise ExplorerError(f"{_name(softmax_fn)} returned weights of dtype {weights.dtype}; expected real numbers")
    return View(scores, np.array(mask), weights, warned, describe(scores, mask, weights, warned, settings))


def colours(weights: np.ndarray, mask: np.ndarray, scale: ColourScale = COLOUR_SCALES[DEFAULT_COLOUR_SCALE]
            ) -> np.ndarray:
    """RGBA image (T, T, 4) of one sequence's weights: :data:`ALLOWED_COLORMAP`, black where blocked at 0, pink leaks, dark red NaN.

    Parameters
    ----------
    weights : numpy.ndarray, shape (T, T), any real dtype (NaN allowed)
    mask : numpy.ndarray of bool, shape (T, T)
        True = the key may be attended to.
    scale : ColourScale
        How the finite weights become colours of :data:`ALLOWED_COLORMAP` (:data:`~attention_lab.core.plots.COLOUR_SCALES`).

    Returns
    -------
    numpy.ndarray of float64, shape (T, T, 4)
    """
    values = np.asarray(weights, dtype=np.float64)
    finite = np.isfinite(values)
    rgba = scale.colours(np.where(finite, values, 0.0), ALLOWED_COLORMAP)
    rgba[~mask & finite & (values == 0)] = BLOCKED
    rgba[~mask & finite & (values != 0)] = LEAK
    rgba[~finite] = NOT_FINITE
    return rgba


class MaskingFigure(ExplorerFigure):
    """A heatmap per sequence, a colour bar and the overflow-threshold panel.

    Static parts (axes, ticks, labels, legends) are drawn by :meth:`layout`
    once per (T, colour scale) and cached; :meth:`render` restores them and draws only the
    changing artists on top (blitting), then encodes PNG bytes.
    """

    def __init__(self):
        super().__init__(FIGURE_SIZE, backgrounds_kept=BACKGROUNDS_KEPT)
        self.weight_colormap = ALLOWED_COLORMAP  # the colour bar shows the colours colours() gives allowed keys
        self.heat_axes, self.images = [], []
        for b, rect in enumerate(HEATMAP_RECTS):
            ax = self.figure.add_axes(rect)
            image = ax.imshow(np.zeros((2, 2, 4)), interpolation="nearest", aspect="auto", animated=True)
            ax.set_xlabel("key position")
            if b == 0:
                ax.set_ylabel("query position")
            ax.set_title(" ", fontsize=10, y=TITLE_Y)
            ax.title.set_animated(True)
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            self.heat_axes.append(ax)
            self.images.append(image)
        self.add_weight_colour_bar(COLORBAR_RECT)
        self.figure.legend(handles=[Patch(color=BLOCKED, label="blocked, weight 0"),
                                    Patch(color=LEAK, label="blocked, but weight > 0"),
                                    Patch(color=NOT_FINITE, label="NaN or inf")],
                           loc="upper left", bbox_to_anchor=(0.04, 1.0), ncol=3, fontsize="small", frameon=False)
        self.overflow_ax = self.figure.add_axes(OVERFLOW_RECT)
        thresholds = [overflow_threshold(d) for d in DTYPES]
        self.bars = list(self.overflow_ax.barh(range(len(DTYPES)), thresholds, color="0.75"))
        self.overflow_ax.set_yticks(range(len(DTYPES)), DTYPES)
        self.overflow_ax.set_xscale("log")
        self.overflow_ax.set_xlim(0.5, LOGIT_SIZES[-1] * 8)
        self.overflow_ax.set_ylim(-0.6, len(DTYPES) - 0.4 + 0.6)  # room for the legend above the bars
        self.overflow_ax.set_xlabel("logit x (log scale)")
        self.overflow_ax.set_title("e^x overflows beyond each bar", fontsize=10, y=TITLE_Y)
        for y, threshold in enumerate(thresholds):
            self.overflow_ax.text(threshold * 1.15, y, f"{threshold:.1f}", va="center", fontsize="small")
        self.logit_line = self.overflow_ax.axvline(1.0, color="#0072B2", lw=1.5, label="largest |logit| here",
                                                   animated=True)
        self.overflow_ax.legend(loc="upper right", fontsize="small", frameon=False)
        self.message = self.figure.text(0.34, 0.5, "", ha="center", va="center", color="#B00020", fontsize=11,
                                        wrap=True, animated=True)
        for bar in self.bars:
            bar.set_animated(True)
        self.animated = [*self.images, *(ax.title for ax in self.heat_axes), *self.bars, self.logit_line,
                         self.message]

    def layout(self, T: int, colour_scale: str = DEFAULT_COLOUR_SCALE) -> None:
        """Set the T-dependent limits and the colour bar's scale, draw the static parts and cache them."""
        self.show_colour_scale(colour_scale_named(colour_scale))  # the images are RGBA: colours() applies the scale
        for ax, image in zip(self.heat_axes, self.images):
            image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xlim(-0.5, T - 0.5)
            ax.set_ylim(T - 0.5, -0.5)
        self.cache_background((T, colour_scale))

    def render(self, settings: Settings, view: View | None, error: str | None) -> bytes:
        """Draw ``view`` (or blank panels and ``error``) onto the cached background; return PNG bytes."""
        T = settings.T
        if self.layout_key != (T, settings.colour_scale):
            self.layout(T, settings.colour_scale)
        for b, (ax, image) in enumerate(zip(self.heat_axes, self.images)):
            image.set_data(np.ones((T, T, 4)) if view is None else
                           colours(view.weights[b], view.mask[b], self.colour_scale))
            ax.title.set_text(f"sequence {b}: length {settings.lengths[b]}")  # b as the batch index, like the tables
        largest = 1.0 if view is None else max(float(np.max(np.abs(view.scores.astype(np.float64)))), 1.0)
        self.logit_line.set_xdata([largest, largest])
        for name, bar in zip(DTYPES, self.bars):
            bar.set_color(CURRENT_DTYPE if name == settings.dtype else "0.75")
        self.message.set_text("" if error is None else f"⚠ {error}")
        return self.blit(self.animated)


def fill_table(dtype: str) -> str:
    """HTML table: what the usual fills for blocked scores become in ``dtype``, and e^x's overflow threshold."""
    rows = "".join(f"<tr><td>{label}</td><td><code>{value:.6g}</code></td></tr>"
                   for label, value in fill_values(dtype).items())
    return (f"<table><tr><th>in {dtype}</th><th>value</th></tr>{rows}"
            f"<tr><td>largest x with finite e^x</td><td><code>{overflow_threshold(dtype):.6g}</code></td></tr></table>")


class MaskingExplorer(HeatmapExplorer):
    """The widget: controls, the figure as an ``ipywidgets.Image``, a summary line and the fill table.

    Parameters
    ----------
    padding_fn : callable
        ``padding_mask(lengths, T) -> bool (B, 1, T)``, True = real token.
    causal_padding_fn : callable
        ``causal_padding_mask(lengths, T) -> bool (B, T, T)``.
    softmax_fn : callable
        ``masked_softmax(scores, mask) -> weights`` of the scores' shape.
    T : int
        Initial padded length, 2 ≤ T ≤ :data:`T_MAX`.
    lengths : tuple of 3 int
        Initial lengths, each in [0, T].
    causal : bool
    dtype : {"float16", "float32", "float64"}
    logit_size : one of :data:`LOGIT_SIZES`
    seed : int
        Initial seed of the random scores.
    colour_scale, sync
        As for :class:`attention_lab.a02_multi_head.visual.MultiHeadExplorer`: the heatmaps' initial colour
        scale, and redrawing inside each change handler (tests).

    Raises
    ------
    ValueError
        If T, a length, the dtype, the logit size or the colour scale is not one the controls offer.
    """

    def __init__(self, padding_fn, causal_padding_fn, softmax_fn, *, T=8, lengths=(8, 5, 0), causal=True,
                 dtype="float32", logit_size=3, seed=0, colour_scale=DEFAULT_COLOUR_SCALE, sync=False):
        import ipywidgets as widgets

        check_settings(T=(T, 2 <= T <= T_MAX, f"between 2 and {T_MAX}"),
                       lengths=(lengths, len(lengths) == B and all(0 <= n <= T for n in lengths),
                                f"{B} integers between 0 and T = {T}"),
                       dtype=(dtype, dtype in DTYPES, f"one of {DTYPES}"),
                       logit_size=(logit_size, logit_size in LOGIT_SIZES, f"one of {LOGIT_SIZES}"))
        super().__init__(MaskingFigure(), (padding_fn, causal_padding_fn, softmax_fn), T=T, T_max=T_MAX,
                         T_tooltip="padded length: number of query and key positions", colour_scale=colour_scale,
                         sync=sync)
        self.length_sliders = [
            control(widgets.IntSlider, f"length {b}", n,
                    f"number of real tokens in sequence {b} (row {b} of the batch); the rest is padding", min=0, max=T)
            for b, n in enumerate(lengths)]
        self.causal_box = control(widgets.Checkbox, "causal mask", causal,
                                  "combine the padding mask with the causal mask (key j ≤ query i)")
        self.dtype_buttons = control(widgets.ToggleButtons, "dtype", dtype, options=DTYPES,
                                     tooltips=["half precision: largest finite number 65504", "single precision",
                                               "double precision"])
        self.logit_slider = control(widgets.SelectionSlider, "logit size", logit_size,
                                    "standard deviation of the random scores (log-spaced)", options=LOGIT_SIZES)
        self.seed_slider = control(widgets.IntSlider, "seed", seed, "random seed for the scores", min=0, max=99)
        self.table = widgets.HTML(fill_table(dtype))
        self.start([[self.T_slider, *self.length_sliders], [self.causal_box, self.dtype_buttons],
                    [self.logit_slider, self.seed_slider, self.colour_dropdown]], below=[self.table],
                   follow=[(self.T_slider, self._lengths_follow_T)])

    @property
    def settings(self) -> Settings:
        """The controls' current values (lengths clamped to T)."""
        T = self.T_slider.value
        return Settings(T, tuple(min(s.value, T) for s in self.length_sliders), self.causal_box.value,
                        self.dtype_buttons.value, self.logit_slider.value, seed=self.seed_slider.value,
                        colour_scale=self.colour_dropdown.value)

    def _lengths_follow_T(self, T: int) -> None:
        for slider in self.length_sliders:
            slider.max = T

    def draw_inputs(self, seed: int) -> np.ndarray:
        """The unscaled scores for ``seed`` (:func:`draw_scores`)."""
        return draw_scores(seed)

    def compute(self, settings: Settings) -> View:
        """The view for ``settings`` (:func:`compute_view`)."""
        return compute_view(*self.functions, settings, self._current_inputs(settings.seed))

    def render(self, settings: Settings) -> bytes:
        """The fill table for the chosen dtype, and the figure (or blank panels and the error) as PNG bytes."""
        self.table.value = fill_table(settings.dtype)
        return self.figure.render(settings, self.view, self.error)


def explore_masking(padding_fn, causal_padding_fn, softmax_fn, **settings):
    """Show the masking explorer (see :class:`MaskingExplorer`); under nbgrader, a note instead.

    Returns
    -------
    MaskingExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).
    """
    return unless_grading("the masking explorer", MaskingExplorer, padding_fn, causal_padding_fn, softmax_fn,
                          **settings)
