"""Static plots of the notebooks (attention weights, row entropies, heatmaps), with the course's axis conventions.

Rows are query positions and columns key positions; weights use a fixed
colour range on the colour-blind-safe ``viridis`` map so that pictures
are comparable across settings, in one of the :data:`COLOUR_SCALES` (linear
0…1, row-normalised, or logarithmic — at large T every weight is about 1/T,
which the linear scale draws almost black); entropy is in nats. Each plot draws into the
Axes it is given, or into a new figure's (which the notebook shows when the
Axes' figure is the cell's last expression). The live explorers draw with
:mod:`attention_lab.core.explorer` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure

COLORMAP = "viridis"  # perceptually uniform and colour-blind safe; every attention heatmap uses it
#: The smallest weight the logarithmic colour scale tells apart (drawn, like every smaller one and 0, in the
#: lowest colour). Fixed, so that pictures of different T stay comparable; 10⁻⁴ leaves the typical weight
#: 1/T of a causal row at T = 512 (≈ 2·10⁻³) a quarter of the way up the colour map, well clear of 0.
LOG_FLOOR = 1e-4


@dataclass(frozen=True)
class ColourScale:
    """How attention weights in [0, 1] become colours of :data:`COLORMAP`.

    Attributes
    ----------
    name : str
        The option's name, as the "colour scale" control shows it.
    label : str
        The colour bar's label: it says which scale the picture uses.
    row_normalised : bool
        Divide every row by its largest weight first, so that each query row's strongest key is drawn at the
        top of the colour map whatever T is.
    logarithmic : bool
        Colour by log10(weight) from :data:`LOG_FLOOR` to 1 instead of linearly from 0 to 1.
    """

    name: str
    label: str
    row_normalised: bool = False
    logarithmic: bool = False

    @property
    def extend(self) -> str:
        """The colour bar's ``extend``: "min" on the log scale (a triangle for weights below :data:`LOG_FLOOR`, and 0), else "neither"."""
        return "min" if self.logarithmic else "neither"

    def norm(self) -> Normalize:
        """A new matplotlib norm from the drawn values to [0, 1]: ``LogNorm(LOG_FLOOR, 1)`` or ``Normalize(0, 1)``.

        Both clip, so a weight of 0 (a blocked key) gets the lowest colour, not the "bad" one.

        Returns
        -------
        matplotlib.colors.Normalize
            A new instance each call (an image and its colour bar must not share one).
        """
        return LogNorm(LOG_FLOOR, 1.0, clip=True) if self.logarithmic else Normalize(0.0, 1.0, clip=True)

    def values(self, weights) -> np.ndarray:
        """The values drawn for ``weights``: the weights, or each row divided by its largest weight.

        Parameters
        ----------
        weights : array_like, shape (..., T_q, T_k), float
            Rows along the last axis. NaN and infinite entries are kept (a plot draws them apart) and ignored
            when finding a row's largest weight.

        Returns
        -------
        numpy.ndarray of float64, the shape of ``weights``
            For a row-normalised scale, a row whose finite weights are all ≤ 0 is returned unchanged (nothing
            to divide by).
        """
        weights = np.asarray(weights, dtype=float)
        if not self.row_normalised:
            return weights
        finite = np.where(np.isfinite(weights), weights, 0.0)
        largest = finite.max(axis=-1, keepdims=True) if weights.shape[-1] else np.ones(weights.shape[:-1] + (1,))
        return weights / np.where(largest > 0, largest, 1.0)

    def colours(self, weights, cmap) -> np.ndarray:
        """The colours of ``weights`` on this scale, for a picture made of precomputed RGBA cells.

        Parameters
        ----------
        weights : array_like, shape (..., T_q, T_k), float
        cmap : matplotlib.colors.Colormap

        Returns
        -------
        numpy.ndarray of float64, shape ``weights.shape + (4,)``
            RGBA in [0, 1]: ``cmap(norm(values(weights)))``.
        """
        return cmap(self.norm()(self.values(weights)))


#: The colour scales every attention heatmap offers, by name.
COLOUR_SCALES = {scale.name: scale for scale in (
    ColourScale("linear 0–1", "attention weight (linear, 0–1)"),
    ColourScale("row-normalised", "weight ÷ its row's largest (linear)", row_normalised=True),
    ColourScale("logarithmic", "attention weight (log scale, 10⁻⁴–1)", logarithmic=True),
)}
#: The default: at T = 512 a causal row's weights are about 1/T, which the linear scale draws almost as dark as
#: the blocked zeros; the logarithmic scale keeps the causal triangle visible (tests/test_explorer.py measures it).
DEFAULT_COLOUR_SCALE = "logarithmic"


def colour_scale_named(name: str) -> ColourScale:
    """The :class:`ColourScale` called ``name``.

    Parameters
    ----------
    name : str
        One of :data:`COLOUR_SCALES` ("linear 0–1", "row-normalised", "logarithmic").

    Returns
    -------
    ColourScale

    Raises
    ------
    ValueError
        If ``name`` is not one of them; the message lists the names.
    """
    try:
        return COLOUR_SCALES[name]
    except (KeyError, TypeError):
        raise ValueError(f"colour_scale must be one of {tuple(COLOUR_SCALES)}; received {name!r}") from None


def axes_or_new(ax: Axes | None, size: tuple[float, float]) -> Axes:
    """``ax``, or the Axes of a new constrained-layout figure of ``size`` inches when ``ax`` is None."""
    if ax is not None:
        return ax
    return Figure(figsize=size, layout="constrained").add_subplot()


def checked_array(values, ndim: int, name: str, shape: str) -> np.ndarray:
    """``values`` as a float array, after checking its number of dimensions.

    Parameters
    ----------
    values : array_like
    ndim : int
        The number of dimensions a plot needs.
    name, shape : str
        The argument's name and its expected shape, for the message: "weights", "(T_q, T_k)".

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    ValueError
        Naming the argument, the expected shape and the shape received, if ``values`` has another number of dimensions.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape}; received shape {values.shape}")
    return values


def heatmap(values: np.ndarray, ax: Axes | None, *, title: str, cmap: str, limits: tuple[float, float],
            labels: tuple[str, str, str], size: tuple[float, float] = (4.2, 3.4), norm: Normalize | None = None,
            extend: str = "neither") -> Axes:
    """Draw a 2-D array as a heatmap on a fixed colour range, with a labelled colour bar.

    Parameters
    ----------
    values : numpy.ndarray, 2-D
        Row i is drawn at y = i, from the top.
    ax : matplotlib Axes or None
        Where to draw (None: a new figure of ``size`` inches).
    title, cmap : str
    limits : (float, float)
        The values at the two ends of the colour map, the same for every picture (linear between them).
    labels : (str, str, str)
        The x axis, the y axis and the colour bar.
    size : (float, float)
        Inches, for a new figure.
    norm : matplotlib.colors.Normalize, optional
        Another mapping of values to the colour map (a :meth:`ColourScale.norm`); replaces ``limits``.
    extend : {"neither", "min", "max", "both"}
        The colour bar's triangles for values beyond its ends.

    Returns
    -------
    matplotlib.axes.Axes
        The heatmap's Axes; its figure also holds the colour bar.
    """
    ax = axes_or_new(ax, size)
    norm = Normalize(*limits) if norm is None else norm
    image = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
    xlabel, ylabel, colorbar_label = labels
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label, extend=extend)
    return ax


def plot_attention_weights(weights, ax: Axes | None = None, title: str = "attention weights",
                           colour_scale: str = "linear 0–1") -> Axes:
    """Draw a ``(T_q, T_k)`` weight matrix as a heatmap: query positions down, key positions across.

    Parameters
    ----------
    weights : array_like, shape (T_q, T_k), float in [0, 1]
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str
    colour_scale : str
        One of :data:`COLOUR_SCALES`: "linear 0–1" (the default, for the small T of the notebooks'
        pictures), "row-normalised" or "logarithmic" (for large T, where every weight is about 1/T).

    Returns
    -------
    matplotlib.axes.Axes
        With a colour bar whose label says the colour scale.

    Raises
    ------
    ValueError
        If ``weights`` is not 2-D, or ``colour_scale`` is not one of :data:`COLOUR_SCALES`.
    """
    scale = colour_scale_named(colour_scale)
    weights = checked_array(weights, 2, "weights", "(T_q, T_k)")
    return heatmap(scale.values(weights), ax, title=title, cmap=COLORMAP, limits=(0.0, 1.0),
                   labels=("key position", "query position", scale.label), norm=scale.norm(), extend=scale.extend)


def plot_row_entropy(entropy, causal: bool, ax: Axes | None = None, label: str = "entropy",
                     show_ceiling: bool = True) -> Axes:
    """Plot the entropy of each query row against its position, with the uniform ceiling.

    Parameters
    ----------
    entropy : array_like, shape (T_q,), float, nats
    causal : bool
        If True the ceiling for row i is ln(i + 1) (it may attend to i + 1
        keys); otherwise ln T_k with T_k = T_q.
    ax : matplotlib Axes, optional
        Where to draw; pass the same Axes again to add a second curve.
    label : str
        Legend label of the entropy curve.
    show_ceiling : bool
        Draw the dashed ceiling (pass False when adding a second curve to the same Axes).

    Returns
    -------
    matplotlib.axes.Axes
        Query position across, entropy in nats up, with a legend right of the Axes (it covers no curve).

    Raises
    ------
    ValueError
        If ``entropy`` is not 1-D.
    """
    entropy = checked_array(entropy, 1, "entropy", "(T_q,)")
    ax = axes_or_new(ax, (4.2, 3.0))
    positions = np.arange(entropy.size)
    ceiling = np.log(positions + 1.0) if causal else np.full(entropy.size, math.log(entropy.size))
    if show_ceiling:
        ax.plot(positions, ceiling, linestyle="--", color="0.4",
                label="uniform ceiling ln(i+1)" if causal else "uniform ceiling ln T")
    ax.plot(positions, entropy, marker="o", markersize=3, label=label)
    ax.set_xlabel("query position")
    ax.set_ylabel("entropy (nats)")
    # Outside the Axes, right of it: inside, some corner is always crossed by one of the curves (the scaled
    # entropy runs along the ceiling, the unscaled one along the bottom). A constrained-layout figure makes room.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
    return ax
