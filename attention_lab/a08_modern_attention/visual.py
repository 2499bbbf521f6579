"""The visuals of assignment 8: RoPE's relative-position score pattern and the KV cache against n_kv_heads.

``explore_rope(apply_rope)`` places one fixed query q at every position m and one fixed key k at every
position n (both shifted by s), turns them with the given ``apply_rope`` — the learner's own at the end of
assignment 8, the reference in the self-study notebook — and shows:

* the T × T heatmap of rope(q, s + m) · rope(k, s + n) over (query position, key position): constant along
  every diagonal (a Toeplitz matrix: the score sees only n − m), the same for every shift s, and not
  symmetric (n − m = +3 and −3 differ);
* the score against the offset n − m next to assignment 3's PE(t) · PE(t + k), which is symmetric: the
  sinusoidal encodings' dot product cannot tell ahead from behind, RoPE's scores can (q ≠ k);
* pair i's share of the score against the offset: one turn every 2π/θ_i positions — the fast pairs wiggle,
  the slow ones drift, as d_head and the base change.

The rotate_half switch pairs coordinate i with i + d_head/2 (GPT-NeoX, Hugging Face) instead of 2i with
2i + 1: that is the learner's ``apply_rope`` on q and k with their coordinates reordered, another Toeplitz
pattern for the same q and k — a convention, not another idea.

``explore_cache_memory(kv_cache_bytes)`` draws, for every n_kv_heads dividing n_heads (multi-query
attention at 1, grouped-query in between, multi-head at n_heads), the bytes of the KV cache per token and
at T tokens from the given ``kv_cache_bytes``, with the model's weights as a reference line when the sizes
are a preset's (Llama 2 70B, Mistral 7B, a GPT-2-small-like model).

ALiBi's bias per head, the third visual of the self-study notebook, is in :mod:`.alibi`.

Both look the function up again by name before every redraw (a re-run cell is picked up); one that raises,
hangs or returns the wrong thing is reported in one red line in place of the summary, and its panels are
left empty. The summary line is each picture's text alternative.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.patches import Patch

from attention_lab.core.explorer import (TITLE_Y, Explorer, ExplorerError, ExplorerFigure, call_for_visual,
                                         check_settings, control, latest, unless_grading)
from attention_lab.core.plots import CURVE_COLOURS, REFERENCE_COLOUR, SIGNED_COLORMAP

# ---- RoPE's score pattern ---------------------------------------------------------------------------------------

T_MAX = 96
D_HEAD_OPTIONS = (2, 4, 8, 16, 32, 64, 128)
BASE_OPTIONS = (100.0, 1_000.0, 10_000.0, 100_000.0, 500_000.0)  # 10 000 in the paper, 500 000 in Llama 3
SHIFT_MAX = 4096
SEED = 8  # the fixed q and k: the first d_head coordinates of two seeded random vectors, scaled to length 1
#: Rounding of float64 scores of unit vectors is about 1e-15; a spread along a diagonal beyond this is a
#: pattern that depends on the absolute positions.
TOEPLITZ_TOLERANCE = 1e-9
ROPE_FIGURE_SIZE = (13.0, 4.0)  # inches at DPI dots per inch
# (left, bottom, width, height) in figure fractions: fixed, a layout engine would re-measure every label per redraw
HEATMAP_RECT, ROPE_BAR_RECT = (0.045, 0.13, 0.23, 0.74), (0.285, 0.13, 0.008, 0.74)
OFFSET_RECT, PAIR_RECT = (0.435, 0.13, 0.29, 0.74), (0.78, 0.13, 0.2, 0.74)
ROPE_STYLE = {"color": CURVE_COLOURS[0], "lw": 1.8, "label": "RoPE: rope(q, m) · rope(k, m + offset)"}
SINUSOID_STYLE = {"color": REFERENCE_COLOUR, "lw": 1.2, "linestyle": "--",
                  "label": "assignment 3: PE(t) · PE(t + offset) ÷ (d_head / 2)"}
PAIR_STYLE = {"color": CURVE_COLOURS[1], "lw": 1.2, "marker": "o", "markersize": 2.5}


class RopeError(ExplorerError):
    """The ``apply_rope`` given to the explorer failed or returned something other than the rotated rows."""


@dataclass(frozen=True)
class RopeSettings:
    """One state of the RoPE explorer's controls."""

    T: int
    d_head: int
    base: float
    shift: int
    pair: int
    rotate_half: bool


@dataclass
class RopeView:
    """Everything drawn for one :class:`RopeSettings`.

    Attributes
    ----------
    scores : ndarray of float, shape (T, T)
        rope(q, s + m) · rope(k, s + n), rows m = query positions, columns n = key positions.
    offsets : ndarray of int, shape (2T + 1,)
        n − m from −T to T.
    by_offset : ndarray of float, shape (2T + 1,)
        rope(q, s + T) · rope(k, s + T + offset).
    pair_by_offset : ndarray of float, shape (2T + 1,)
        The same with only pair i of q and k kept.
    toeplitz_spread : float
        The largest max − min along one diagonal of ``scores`` (0 up to rounding for RoPE).
    shift_change : float
        The largest change of a score when the shift s is undone (0 when s = 0).
    asymmetry : float
        max |score(offset) − score(−offset)|.
    summary : str
    """

    scores: np.ndarray
    offsets: np.ndarray
    by_offset: np.ndarray
    pair_by_offset: np.ndarray
    toeplitz_spread: float
    shift_change: float
    asymmetry: float
    summary: str


def query_and_key(d_head: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed q and k of the explorer: two seeded random vectors of length 1, shape (d_head,) each."""
    rng = np.random.default_rng(SEED)
    q, k = rng.normal(size=(2, max(D_HEAD_OPTIONS)))[:, :d_head]
    return q / np.linalg.norm(q), k / np.linalg.norm(k)


def rotate_half_order(d_head: int) -> np.ndarray:
    """The reordering that turns rotate_half's pairs (i, i + d_head/2) into the pairs (2i, 2i + 1).

    Returns
    -------
    ndarray of int, shape (d_head,)
        ``x[order]`` has x_i at 2i and x_{i + d_head/2} at 2i + 1, so that RoPE with the (2i, 2i + 1) pairing on
        ``x[order]`` is RoPE with the rotate_half pairing on x, reordered; dot products do not see the order.
    """
    half = d_head // 2
    return np.column_stack([np.arange(half), np.arange(half, d_head)]).ravel()


def sinusoid_by_offset(offsets: np.ndarray, d_head: int, base: float) -> np.ndarray:
    """Assignment 3's PE(t) · PE(t + k) ÷ (d_head / 2): the mean over the pairs of cos(k ω_i), ω_i = base^(−2i/d_head).

    The same for every t (a sum of cos(k ω_i), by the angle-difference formula) and even in k.

    Parameters
    ----------
    offsets : ndarray of int, shape (n,)
    d_head : int
        Even.
    base : float

    Returns
    -------
    ndarray of float, shape (n,)
        In [−1, 1], 1 at k = 0.
    """
    omega = base ** (-np.arange(0, d_head, 2) / d_head)
    return np.cos(np.outer(offsets, omega)).mean(axis=1)


def toeplitz_spread(scores: np.ndarray) -> float:
    """The largest max − min of the entries along one diagonal of a square matrix (0 for a Toeplitz matrix)."""
    T = scores.shape[0]
    return max(float(np.ptp(np.diagonal(scores, offset))) for offset in range(-(T - 1), T))


def _checked(apply_rope: Callable, value, x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """What apply_rope(x, positions, base) returned, checked: a finite real array of the shape of x."""
    name = getattr(apply_rope, "__name__", "apply_rope")
    call = f"{name}(x of shape {x.shape}, positions {positions[0]} … {positions[-1]}, {base:g})"
    if not isinstance(value, np.ndarray) or value.shape != x.shape:
        got = f"shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
        raise RopeError(f"{call} returned {got}; expected the rotated rows, shape {x.shape}")
    if value.dtype.kind not in "fiu":
        raise RopeError(f"{call} returned dtype {value.dtype}; expected real numbers")
    if not np.isfinite(value).all():
        raise RopeError(f"{call} returned NaN or infinite values")
    return value.astype(float)


def compute_rope_view(apply_rope: Callable, settings: RopeSettings) -> RopeView:
    """The score pattern of ``apply_rope`` for one setting of the controls, measured, and the summary line.

    Queries sit at s + m and keys at s + n, m, n = 0 … T − 1; the offset curves put the query at s + T and the
    keys at s + T + offset, offset = −T … T, so that no position is negative. All calls share one time limit
    (:data:`~attention_lab.core.explorer.CALL_SECONDS`).

    Raises
    ------
    RopeError
        If ``apply_rope`` raises, hangs, or returns anything but a finite real array of the shape of its x.
    """
    s = settings
    q, k = query_and_key(s.d_head)
    if s.rotate_half:
        order = rotate_half_order(s.d_head)
        q, k = q[order], k[order]
    T = s.T
    offsets = np.arange(-T, T + 1)
    pair = np.zeros(s.d_head)
    pair[2 * s.pair:2 * s.pair + 2] = 1.0
    query, keys = np.array([s.shift + T]), s.shift + T + offsets
    grid, start = s.shift + np.arange(T), np.arange(T)
    # (name, x, positions): every call of one redraw, made on fresh arrays
    calls = [("Q", np.tile(q, (T, 1)), grid), ("K", np.tile(k, (T, 1)), grid),
             ("Q0", np.tile(q, (T, 1)), start), ("K0", np.tile(k, (T, 1)), start),
             ("q far", q[None], query), ("k far", np.tile(k, (2 * T + 1, 1)), keys),
             ("q pair", (q * pair)[None], query), ("k pair", np.tile(k * pair, (2 * T + 1, 1)), keys)]
    if not s.shift:
        calls = [call for call in calls if call[0] not in ("Q0", "K0")]
    function = latest(apply_rope)

    def all_calls():
        return [function(x.copy(), positions.copy(), s.base) for _, x, positions in calls]

    try:
        results = call_for_visual(all_calls, name=getattr(apply_rope, "__name__", "apply_rope"))
    except ExplorerError as error:
        raise RopeError(str(error)) from None
    out = {name: _checked(apply_rope, value, x, positions, s.base)
           for (name, x, positions), value in zip(calls, results)}
    scores = out["Q"] @ out["K"].T
    unshifted = out["Q0"] @ out["K0"].T if s.shift else scores
    by_offset = out["k far"] @ out["q far"][0]
    pair_by_offset = out["k pair"] @ out["q pair"][0]
    spread = toeplitz_spread(scores)
    shift_change = float(np.abs(scores - unshifted).max())
    asymmetry = float(np.abs(by_offset - by_offset[::-1]).max())
    theta = s.base ** (-2 * s.pair / s.d_head)
    view = RopeView(scores, offsets, by_offset, pair_by_offset, spread, shift_change, asymmetry, "")
    view.summary = rope_summary(view, s, theta)
    return view


def rope_summary(view: RopeView, s: RopeSettings, theta: float) -> str:
    """The summary line: the three properties in numbers, and pair i's period."""
    T, shown = s.T, min(3, s.T)
    ahead, behind = view.by_offset[T + shown], view.by_offset[T - shown]
    if view.toeplitz_spread <= TOEPLITZ_TOLERANCE:
        pattern = (f"Every diagonal of the {T} × {T} scores is constant (spread {view.toeplitz_spread:.1e}): the "
                   "score sees only the offset n − m")
    else:
        pattern = (f"The diagonals of the {T} × {T} scores are NOT constant (spread up to "
                   f"{view.toeplitz_spread:.3g}): these scores depend on the positions themselves, not only on "
                   "n − m — RoPE's would not")
    if s.shift:
        moved = (f"shifting every position by s = {s.shift} changes no score by more than {view.shift_change:.1e}"
                 if view.shift_change <= TOEPLITZ_TOLERANCE else
                 f"shifting every position by s = {s.shift} changes scores by up to {view.shift_change:.3g}")
    else:
        moved = "the shift s is 0 (move it to shift every position)"
    symmetric = (f"not symmetric: the score at offset +{shown} is {ahead:.3f}, at −{shown} {behind:.3f}, while "
                 "assignment 3's PE(t) · PE(t + k) is the same for ±k" if view.asymmetry > TOEPLITZ_TOLERANCE else
                 f"symmetric in the offset (largest difference {view.asymmetry:.1e}), as assignment 3's "
                 "PE(t) · PE(t + k)")
    period = 2 * math.pi / theta
    pairing = ("rotate_half pairing (i, i + d_head/2): your apply_rope on q and k with their coordinates reordered — "
               "another pattern for the same q, k, with the same properties" if s.rotate_half else
               "pairs (2i, 2i + 1)")
    return (f"{pattern}; {moved}; {symmetric}. Pair {s.pair} turns by θ_{s.pair} = {theta:.3g} rad per position: one "
            f"turn every {period:,.3g} positions (d_head = {s.d_head}, base = {s.base:,.0f}; {pairing}).")


class RopeFigure(ExplorerFigure):
    """The heatmap, the curves by offset and pair i's curve, redrawn whole for each view (their axes change)."""

    def __init__(self):
        super().__init__(ROPE_FIGURE_SIZE)
        self.heatmap_ax = self.figure.add_axes(HEATMAP_RECT)
        self.offset_ax = self.figure.add_axes(OFFSET_RECT)
        self.pair_ax = self.figure.add_axes(PAIR_RECT)
        self.colour_bar_ax = self.figure.add_axes(ROPE_BAR_RECT)
        # |q| = |k| = 1 and rotations keep lengths, so every score is in [−1, 1]; the colours span ± the largest
        # |score| of the view instead, symmetric about 0, so that the stripes stay visible for every q·k
        self.image = self.heatmap_ax.imshow(np.zeros((2, 2)), cmap=SIGNED_COLORMAP, norm=Normalize(-1.0, 1.0),
                                            interpolation="nearest", aspect="auto")
        self.colour_bar = self.figure.colorbar(self.image, cax=self.colour_bar_ax,
                                               label="score rope(q, m) · rope(k, n)")

    def render(self, settings: RopeSettings, view: RopeView | None) -> bytes:
        """Draw one view (empty RoPE panels when ``view`` is None; assignment 3's curve always) as PNG bytes."""
        s, T = settings, settings.T
        low, high = s.shift - 0.5, s.shift + T - 0.5  # cell centres at the positions themselves
        self.image.set_data(view.scores if view is not None else np.full((T, T), np.nan))
        largest = float(np.abs(view.scores).max()) if view is not None else 1.0
        self.image.set_clim(-max(largest, 1e-12), max(largest, 1e-12))
        self.image.set_extent((low, high, high, low))  # query position s at the top, as every attention heatmap
        ax = self.heatmap_ax
        ax.set_xlabel("key position n")
        ax.set_ylabel("query position m")
        ax.set_title(f"rope(q, m) · rope(k, n), T = {T}, shift s = {s.shift}", fontsize=10, y=TITLE_Y)

        offsets = np.arange(-T, T + 1)
        ax = self.offset_ax
        ax.clear()
        ax.axvline(0, color="0.75", lw=0.8)
        ax.axhline(0, color="0.75", lw=0.8)
        if view is not None:
            ax.plot(offsets, view.by_offset, **ROPE_STYLE)
        ax.plot(offsets, sinusoid_by_offset(offsets, s.d_head, s.base), **SINUSOID_STYLE)
        ax.set_xlim(-T, T)
        ax.set_ylim(-1.05, 1.05)
        ax.set_xlabel("offset n − m (key position − query position)")
        ax.set_ylabel("score")
        ax.set_title(f"by offset: RoPE's is not symmetric, the sinusoids' is (d_head = {s.d_head})", fontsize=10,
                     y=TITLE_Y)
        ax.legend(loc="lower left", fontsize="small", framealpha=0.9)

        ax = self.pair_ax
        ax.clear()
        ax.axhline(0, color="0.75", lw=0.8)
        theta = s.base ** (-2 * s.pair / s.d_head)
        if view is not None:
            ax.plot(offsets, view.pair_by_offset, label=f"pair {s.pair} alone", **PAIR_STYLE)
            top = max(float(np.abs(view.pair_by_offset).max()), 1e-3) * 1.15
            ax.set_ylim(-top, top)
            ax.legend(loc="lower left", fontsize="small", framealpha=0.9)
        ax.set_xlim(-T, T)
        ax.set_xlabel("offset n − m")
        ax.set_ylabel(f"pair {s.pair}'s share of the score")
        ax.set_title(f"pair {s.pair}: one turn every {2 * math.pi / theta:,.3g} positions", fontsize=10,
                     y=TITLE_Y)
        return self.png()


class RopeExplorer(Explorer):
    """The widget: T, d_head, base, the shift s, the pair i and the rotate_half switch above the three panels.

    Parameters
    ----------
    apply_rope : callable
        ``apply_rope(x, positions, base)`` → x with each row turned by its position (shape of x).
    T : int
        Initial number of query and key positions, 2 … :data:`T_MAX`.
    d_head : int
        One of :data:`D_HEAD_OPTIONS`.
    base : float
        One of :data:`BASE_OPTIONS`.
    shift : int
        The shift s of every position, 0 … :data:`SHIFT_MAX`.
    pair : int
        The pair i drawn alone, 0 … d_head/2 − 1.
    rotate_half : bool
        Pair coordinate i with i + d_head/2 instead of 2i with 2i + 1.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If an initial value is not one allowed; the message names the values allowed.
    """

    def __init__(self, apply_rope: Callable, *, T: int = 32, d_head: int = 16, base: float = 10_000.0,
                 shift: int = 0, pair: int = 0, rotate_half: bool = False, sync: bool = False):
        import ipywidgets as widgets

        check_settings(T=(T, isinstance(T, int) and 2 <= T <= T_MAX, f"an integer from 2 to {T_MAX}"),
                       d_head=(d_head, d_head in D_HEAD_OPTIONS, f"one of {D_HEAD_OPTIONS}"),
                       base=(base, base in BASE_OPTIONS, f"one of {tuple(f'{b:g}' for b in BASE_OPTIONS)}"),
                       shift=(shift, isinstance(shift, int) and 0 <= shift <= SHIFT_MAX,
                              f"an integer from 0 to {SHIFT_MAX}"),
                       pair=(pair, isinstance(pair, int) and 0 <= pair < d_head // 2,
                             f"an integer from 0 to d_head / 2 − 1 = {d_head // 2 - 1}"),
                       rotate_half=(rotate_half, isinstance(rotate_half, bool), "True or False"))
        super().__init__(RopeFigure(), sync=sync)
        self.apply_rope = apply_rope
        self.T_slider = control(widgets.IntSlider, "T", T, "number of query and key positions", min=2, max=T_MAX)
        self.d_head_slider = control(widgets.SelectionSlider, "d_head", d_head,
                                     "size of q and k: d_head / 2 pairs, each turning at its own speed",
                                     options=D_HEAD_OPTIONS)
        self.base_slider = control(widgets.SelectionSlider, "base", float(base),
                                   "θ_i = base^(−2i/d_head): a larger base makes the slow pairs slower",
                                   options=[(f"{b:,.0f}", b) for b in BASE_OPTIONS])
        self.shift_slider = control(widgets.IntSlider, "shift s", shift, "added to every query and key position",
                                    min=0, max=SHIFT_MAX)
        self.pair_slider = control(widgets.IntSlider, "pair i", pair, "the pair drawn alone on the right",
                                   min=0, max=d_head // 2 - 1)
        self.rotate_half_box = control(widgets.Checkbox, "rotate_half pairing", rotate_half,
                                       "pair coordinate i with i + d_head/2 (GPT-NeoX, Hugging Face) instead of 2i "
                                       "with 2i + 1 (the paper, Meta's LLaMA, this course)")
        self.start([[self.T_slider, self.d_head_slider, self.base_slider],
                    [self.shift_slider, self.pair_slider, self.rotate_half_box]],
                   follow=[(self.d_head_slider, self._fit_pair)])

    def _fit_pair(self, d_head: int) -> None:
        """Keep the pair slider within the d_head / 2 pairs."""
        self.pair_slider.value = min(self.pair_slider.value, d_head // 2 - 1)
        self.pair_slider.max = d_head // 2 - 1

    @property
    def settings(self) -> RopeSettings:
        """The controls' current values."""
        return RopeSettings(self.T_slider.value, self.d_head_slider.value, float(self.base_slider.value),
                            self.shift_slider.value, self.pair_slider.value, self.rotate_half_box.value)

    def compute(self, settings: RopeSettings) -> RopeView:
        """The score pattern for ``settings`` (:func:`compute_rope_view`)."""
        return compute_rope_view(self.apply_rope, settings)


def explore_rope(apply_rope: Callable, **settings):
    """Show RoPE's score pattern for an ``apply_rope`` (see :class:`RopeExplorer`), unless nbgrader is running.

    Parameters
    ----------
    apply_rope : callable
        ``apply_rope(x, positions, base)``: x of shape (T, d_head), positions of shape (T,), int.
    **settings
        The initial controls: ``T``, ``d_head``, ``base``, ``shift``, ``pair``, ``rotate_half``.

    Returns
    -------
    RopeExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).

    Raises
    ------
    ValueError
        If an initial setting is not allowed (:class:`RopeExplorer`).
    """
    return unless_grading("the RoPE explorer", RopeExplorer, apply_rope, **settings)


# ---- KV-cache memory against n_kv_heads ------------------------------------------------------------------------

T_OPTIONS = tuple(2 ** p for p in range(8, 18))  # 256 … 131 072 tokens
LAYERS_MAX, HEADS_MAX, D_HEAD_MAX = 128, 128, 256
BYTES_OPTIONS = (("1 (8-bit)", 1), ("2 (float16, bfloat16)", 2), ("4 (float32)", 4))


@dataclass(frozen=True)
class Preset:
    """A model's sizes: what its KV cache and its weights take.

    Attributes
    ----------
    n_layers, n_heads, n_kv_heads, d_head : int
    bytes_per_value : int
        As the model is usually run.
    parameters : float
        Number of weights (for the reference line: parameters × bytes per value).
    T : int
        Its context length, one of :data:`T_OPTIONS`.
    source : str
    """

    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    bytes_per_value: int
    parameters: float
    T: int
    source: str


#: The presets, by name.
PRESETS = {
    "Llama 2 70B": Preset(80, 64, 8, 128, 2, 68.98e9, 4096, "Touvron et al. 2023, Table 1 and §2.2; its config.json"),
    "Mistral 7B": Preset(32, 32, 8, 128, 2, 7.24e9, 8192, "Jiang et al. 2023, Table 1"),
    "GPT-2-small-like (MHA)": Preset(12, 12, 12, 64, 4, 124e6, 1024, "Radford et al. 2019, the 124M model, float32"),
}
MEMORY_FIGURE_SIZE = (12.0, 4.0)
PER_TOKEN_RECT, AT_T_RECT = (0.065, 0.2, 0.35, 0.68), (0.49, 0.2, 0.31, 0.68)
KIND_COLOURS = {"MQA": CURVE_COLOURS[2], "GQA": CURVE_COLOURS[0], "MHA": CURVE_COLOURS[1]}
KIND_NAMES = {"MQA": "MQA: 1 kv head", "GQA": "GQA: groups of query heads", "MHA": "MHA: n_kv_heads = n_heads"}


class CacheBytesError(ExplorerError):
    """The ``kv_cache_bytes`` given to the explorer failed or returned something other than a number of bytes."""


@dataclass(frozen=True)
class MemorySettings:
    """One state of the memory explorer's controls."""

    T: int
    n_layers: int
    n_heads: int
    d_head: int
    bytes_per_value: int
    log_scale: bool = False


@dataclass
class MemoryView:
    """Everything drawn for one :class:`MemorySettings`.

    Attributes
    ----------
    n_kv_heads : ndarray of int, shape (n,)
        Every divisor of n_heads, increasing.
    kinds : tuple of str
        "MQA", "GQA" or "MHA" per bar (one head: "MHA").
    per_token, at_T : ndarray of float, shape (n,)
        Bytes, as ``kv_cache_bytes`` returned them for 1 and for T tokens.
    preset : str or None
        The preset whose sizes these are (n_layers, n_heads, d_head), if any.
    weights_bytes : float or None
        That model's parameters × bytes per value.
    summary : str
    """

    n_kv_heads: np.ndarray
    kinds: tuple
    per_token: np.ndarray
    at_T: np.ndarray
    preset: str | None
    weights_bytes: float | None
    summary: str


def readable_bytes(n: float) -> str:
    """Bytes in binary units, three significant digits: 327680 → "320 KiB", 10737418240 → "10 GiB"."""
    for power, unit in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n >= 1024 ** power:
            return f"{n / 1024 ** power:.3g} {unit}"
    return f"{n:.0f} B"


def divisors(n: int) -> np.ndarray:
    """Every divisor of n, increasing: the n_kv_heads that share n query heads evenly."""
    return np.array([d for d in range(1, n + 1) if n % d == 0])


def kind_of(n_kv_heads: int, n_heads: int) -> str:
    """"MHA" when every query head has its own key/value head, "MQA" for one shared by all, else "GQA"."""
    return "MHA" if n_kv_heads == n_heads else "MQA" if n_kv_heads == 1 else "GQA"


def preset_of(settings: MemorySettings) -> str | None:
    """The preset with these n_layers, n_heads and d_head, or None."""
    for name, preset in PRESETS.items():
        if (preset.n_layers, preset.n_heads, preset.d_head) == (settings.n_layers, settings.n_heads, settings.d_head):
            return name
    return None


def compute_memory_view(kv_cache_bytes: Callable, settings: MemorySettings) -> MemoryView:
    """The cache's bytes per token and at T tokens for every n_kv_heads dividing n_heads, and the summary line.

    Raises
    ------
    CacheBytesError
        If ``kv_cache_bytes`` raises, hangs, or returns something other than a finite number ≥ 0 (a bool is not).
    """
    s = settings
    function, name = latest(kv_cache_bytes), getattr(kv_cache_bytes, "__name__", "kv_cache_bytes")
    heads = divisors(s.n_heads)

    def all_calls():
        return [[function(T, s.n_layers, int(g), s.d_head, s.bytes_per_value) for g in heads] for T in (1, s.T)]

    per_token, at_T = call_for_visual(all_calls, name=name)  # one time limit for every bar
    for T, values in ((1, per_token), (s.T, at_T)):
        for g, value in zip(heads, values):
            call = f"{name}({T}, {s.n_layers}, {g}, {s.d_head}, {s.bytes_per_value})"
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise CacheBytesError(f"{call} returned {type(value).__name__} {value!r:.60}; expected a number of "
                                      "bytes")
            if not math.isfinite(value) or value < 0:
                raise CacheBytesError(f"{call} returned {value!r}; a number of bytes is finite and ≥ 0")
    per_token, at_T = np.array(per_token, dtype=float), np.array(at_T, dtype=float)
    kinds = tuple(kind_of(int(g), s.n_heads) for g in heads)
    preset = preset_of(s)
    weights = PRESETS[preset].parameters * s.bytes_per_value if preset else None
    view = MemoryView(heads, kinds, per_token, at_T, preset, weights, "")
    view.summary = memory_summary(view, s)
    return view


def memory_summary(view: MemoryView, s: MemorySettings) -> str:
    """The summary line: the cache of MHA, of the preset's (or the middle) GQA and of MQA, per token and at T."""
    shown = [0, len(view.n_kv_heads) - 1]
    if view.preset and PRESETS[view.preset].n_kv_heads in view.n_kv_heads[1:-1]:
        shown.insert(1, int(np.flatnonzero(view.n_kv_heads == PRESETS[view.preset].n_kv_heads)[0]))
    elif len(view.n_kv_heads) > 2:
        shown.insert(1, len(view.n_kv_heads) // 2)
    parts = [f"{view.kinds[i]} with {view.n_kv_heads[i]} kv head{'s' if view.n_kv_heads[i] > 1 else ''}: "
             f"{readable_bytes(view.per_token[i])} per token, {readable_bytes(view.at_T[i])} at {s.T:,} tokens"
             for i in reversed(sorted(set(shown)))]
    model = view.preset or "these sizes"
    text = (f"{model} ({s.n_layers} layers, {s.n_heads} query heads, d_head = {s.d_head}, {s.bytes_per_value} "
            f"byte{'s' if s.bytes_per_value > 1 else ''} per value): " + "; ".join(parts) + ". ")
    if view.weights_bytes is not None:
        text += (f"The weights take {readable_bytes(view.weights_bytes)}; the largest cache at {s.T:,} tokens is "
                 f"{view.at_T.max() / view.weights_bytes:.1%} of that. ")
    return text + "The cache grows linearly in n_kv_heads and in T."


class MemoryFigure(ExplorerFigure):
    """The two bar charts, redrawn whole for each view (their bars change with n_heads)."""

    def __init__(self):
        super().__init__(MEMORY_FIGURE_SIZE)
        self.per_token_ax = self.figure.add_axes(PER_TOKEN_RECT)
        self.at_T_ax = self.figure.add_axes(AT_T_RECT)

    def render(self, settings: MemorySettings, view: MemoryView | None) -> bytes:
        """Draw one view (empty panels when ``view`` is None) and return the figure as PNG bytes."""
        s = settings
        for ax, key, title in ((self.per_token_ax, "per_token", "KV cache per token"),
                               (self.at_T_ax, "at_T", f"KV cache at T = {s.T:,} tokens")):
            ax.clear()
            ax.set_xlabel("n_kv_heads (key/value heads)")
            ax.set_title(title, fontsize=10)
            if view is None:
                ax.set_ylabel("bytes")
                continue
            values = getattr(view, key)
            top = float(values.max()) if values.size else 1.0
            weights = view.weights_bytes if key == "at_T" else None
            line = weights is not None and (s.log_scale or weights <= 1.5 * top)
            if line:
                top = max(top, weights)
            # one binary unit per axis (KiB, MiB, GiB), chosen by its largest value, so that ticks are round numbers
            unit, name = next(((1024 ** p, u) for p, u in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB"))
                               if top >= 1024 ** p), (1, "bytes"))
            ax.set_yscale("log" if s.log_scale else "linear")
            ax.set_ylabel(name if unit > 1 else "bytes")
            place = np.arange(len(values))
            ax.bar(place, values / unit, color=[KIND_COLOURS[kind] for kind in view.kinds], width=0.7)
            model = PRESETS[view.preset].n_kv_heads if view.preset else None
            ax.set_xticks(place, [f"{g}\n{kind}" + ("\n(the model)" if g == model else "")
                                  for g, kind in zip(view.n_kv_heads, view.kinds)],
                          fontsize="small" if len(values) <= 10 else "x-small")
            if line:
                ax.axhline(weights / unit, color=REFERENCE_COLOUR, linestyle="--", lw=1.2,
                           label=f"weights of {view.preset}")
            elif weights is not None:
                ax.text(0.02, 0.97, f"weights: {readable_bytes(weights)}, {weights / top:.3g}× the top bar (off the "
                        "axis; log axes show them)", transform=ax.transAxes, va="top", fontsize="small")
            if s.log_scale:
                ax.yaxis.set_major_formatter(lambda value, _: f"{value:g}")  # 0.1, 1, 10, not 10⁻¹, 10⁰, 10¹
                positive = values[values > 0] / unit
                ax.set_ylim(float(positive.min()) / 2 if positive.size else 0.5, max(top / unit, 1.0) * 3)
            else:
                ax.set_ylim(0, max(top / unit, 1e-9) * (1.25 if weights is not None and not line else 1.1))
        if view is not None:
            kinds = [kind for kind in ("MQA", "GQA", "MHA") if kind in view.kinds]
            handles = [Patch(color=KIND_COLOURS[kind], label=KIND_NAMES[kind]) for kind in kinds]
            self.at_T_ax.legend(handles=handles + self.at_T_ax.get_lines(), loc="upper left",
                                bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
        return self.png()


class CacheMemoryExplorer(Explorer):
    """The widget: a preset, T, n_layers, n_heads, d_head, bytes per value and log axes above the bars.

    Parameters
    ----------
    kv_cache_bytes : callable
        ``kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value)`` → bytes.
    preset : str
        One of :data:`PRESETS`: its sizes are the initial ones; a size given here replaces the preset's.
    T : int, optional
        One of :data:`T_OPTIONS` (default: the preset's context length).
    n_layers, n_heads, d_head : int, optional
        1 … :data:`LAYERS_MAX`, :data:`HEADS_MAX`, :data:`D_HEAD_MAX`.
    bytes_per_value : int, optional
        1, 2 or 4.
    log_scale : bool
        Logarithmic y axes.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If a setting is not one allowed; the message names the values allowed.
    """

    def __init__(self, kv_cache_bytes: Callable, *, preset: str = "Llama 2 70B", T: int | None = None,
                 n_layers: int | None = None, n_heads: int | None = None, d_head: int | None = None,
                 bytes_per_value: int | None = None, log_scale: bool = False, sync: bool = False):
        import ipywidgets as widgets

        check_settings(preset=(preset, preset in PRESETS, f"one of {tuple(PRESETS)}"))
        model = PRESETS[preset]
        T = model.T if T is None else T
        n_layers = model.n_layers if n_layers is None else n_layers
        n_heads = model.n_heads if n_heads is None else n_heads
        d_head = model.d_head if d_head is None else d_head
        bytes_per_value = model.bytes_per_value if bytes_per_value is None else bytes_per_value
        integer = lambda v, top: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top  # noqa: E731
        check_settings(T=(T, T in T_OPTIONS, f"one of {T_OPTIONS}"),
                       n_layers=(n_layers, integer(n_layers, LAYERS_MAX), f"an integer from 1 to {LAYERS_MAX}"),
                       n_heads=(n_heads, integer(n_heads, HEADS_MAX), f"an integer from 1 to {HEADS_MAX}"),
                       d_head=(d_head, integer(d_head, D_HEAD_MAX), f"an integer from 1 to {D_HEAD_MAX}"),
                       bytes_per_value=(bytes_per_value, bytes_per_value in (1, 2, 4), "1, 2 or 4"),
                       log_scale=(log_scale, isinstance(log_scale, bool), "True or False"))
        super().__init__(MemoryFigure(), sync=sync)
        self.kv_cache_bytes = kv_cache_bytes
        self.preset_dropdown = control(widgets.Dropdown, "model", preset, "set every size to a model's",
                                       options=tuple(PRESETS))
        self.T_slider = control(widgets.SelectionSlider, "T (tokens)", T, "tokens in the cache", options=T_OPTIONS)
        self.layers_slider = control(widgets.IntSlider, "n_layers", n_layers, "every layer keeps its own cache",
                                     min=1, max=LAYERS_MAX)
        self.heads_slider = control(widgets.IntSlider, "n_heads", n_heads,
                                    "query heads; every n_kv_heads dividing it is drawn", min=1, max=HEADS_MAX)
        self.d_head_slider = control(widgets.IntSlider, "d_head", d_head, "numbers per key and per value",
                                     min=1, max=D_HEAD_MAX)
        self.bytes_buttons = control(widgets.ToggleButtons, "bytes per value", bytes_per_value,
                                     "the size of one stored number", options=BYTES_OPTIONS)
        self.log_box = control(widgets.Checkbox, "logarithmic y axes", log_scale,
                               "bytes on a log scale: MQA's small bars stay visible next to the weights")
        self.start([[self.preset_dropdown, self.T_slider, self.log_box],
                    [self.layers_slider, self.heads_slider, self.d_head_slider], [self.bytes_buttons]],
                   follow=[(self.preset_dropdown, self._use_preset)])

    def _use_preset(self, name: str) -> None:
        """Set every size to the preset's (one redraw follows)."""
        model = PRESETS[name]
        self.T_slider.value, self.layers_slider.value = model.T, model.n_layers
        self.heads_slider.value, self.d_head_slider.value = model.n_heads, model.d_head
        self.bytes_buttons.value = model.bytes_per_value

    @property
    def settings(self) -> MemorySettings:
        """The controls' current values."""
        return MemorySettings(self.T_slider.value, self.layers_slider.value, self.heads_slider.value,
                              self.d_head_slider.value, self.bytes_buttons.value, self.log_box.value)

    def compute(self, settings: MemorySettings) -> MemoryView:
        """The bars for ``settings`` (:func:`compute_memory_view`)."""
        return compute_memory_view(self.kv_cache_bytes, settings)


def explore_cache_memory(kv_cache_bytes: Callable, **settings):
    """Show the KV cache's memory against n_kv_heads (see :class:`CacheMemoryExplorer`), unless nbgrader runs.

    Parameters
    ----------
    kv_cache_bytes : callable
        ``kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value)`` → int bytes.
    **settings
        ``preset``, ``T``, ``n_layers``, ``n_heads``, ``d_head``, ``bytes_per_value``, ``log_scale``.

    Returns
    -------
    CacheMemoryExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).

    Raises
    ------
    ValueError
        If an initial setting is not allowed (:class:`CacheMemoryExplorer`).
    """
    return unless_grading("the KV-cache memory explorer", CacheMemoryExplorer, kv_cache_bytes, **settings)
