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
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize, to_hex
from matplotlib.figure import Figure

COLORMAP = "viridis"  # perceptually uniform and colour-blind safe; every attention heatmap uses it
#: The colour map of signed values (positional encodings, Jacobians): its lightness rises from end to end, so that
#: −1 and +1 differ in greyscale and under colour-vision deficiency (a diverging map such as RdBu has two ends of
#: the same lightness). Optimised for colour-vision deficiency (Nuñez et al. 2018).
SIGNED_COLORMAP = "cividis"
#: The colours of the curves a legend tells apart, in the order a plot uses them: samples of viridis (whose
#: lightness hardly moves under simulated colour-vision deficiency) and black, each at least 20 apart in CIELAB
#: lightness from every other, also under simulated protan, deutan and tritan vision (tests/test_colour_contrast.py
#: measures the drawn lines), so that they stay apart in greyscale and print too.
CURVE_COLOURS = tuple(to_hex(colormaps[COLORMAP](x)) for x in (0.4, 0.75, 0.1)) + ("#000000",)
#: Reference lines (uniform ceilings, 1/T): black, dashed by the plots, so that they differ from the first three
#: curve colours in lightness and from the fourth in pattern.
REFERENCE_COLOUR = "#000000"
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
        ax.plot(positions, ceiling, linestyle="--", color=REFERENCE_COLOUR,
                label="uniform ceiling ln(i+1)" if causal else "uniform ceiling ln T")
    # each further entropy curve on these Axes takes the next curve colour (told apart in lightness)
    previous = sum(1 for line in ax.get_lines() if line.get_gid() == "row entropy")
    ax.plot(positions, entropy, marker="o", markersize=3, label=label, gid="row entropy",
            color=CURVE_COLOURS[previous % 3])
    ax.set_xlabel("query position")
    ax.set_ylabel("entropy (nats)")
    # Outside the Axes, right of it: inside, some corner is always crossed by one of the curves (the scaled
    # entropy runs along the ceiling, the unscaled one along the bottom). A constrained-layout figure makes room.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
    return ax


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], layout: str | None = "constrained",
             **kwargs):
    """A new figure and its Axes outside pyplot, for :func:`show_figure`: nothing appears without its text.

    A pyplot figure is shown by the inline backend at the end of its cell even when the cell fails before the
    figure is drawn (an empty image, with no text alternative); this one appears only through :func:`show_figure`.

    Parameters
    ----------
    nrows, ncols : int
        The grid of Axes, as ``matplotlib.pyplot.subplots``.
    figsize : (float, float)
        Inches.
    layout : str or None
        The figure's layout engine ("constrained" by default, as every figure of the notebooks; None for none).
    **kwargs
        Passed to ``Figure.subplots`` (``sharex``, ``squeeze``, …).

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes or numpy.ndarray of Axes)
    """
    figure = Figure(figsize=figsize, layout=layout)
    return figure, figure.subplots(nrows, ncols, **kwargs)


def _require_description(description) -> None:
    """Raise ValueError unless ``description`` is a non-empty text: every figure needs its text alternative."""
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"description must be a non-empty text saying what the figure shows; received {description!r}")


def figure_html(figure: Figure, description: str) -> str:
    """A figure as HTML: the PNG with a short alternative text, linked to a visible caption that says what it shows.

    JupyterLab shows a figure's ``image/png`` output as an ``<img>`` without alternative text, which screen readers
    announce as "image" and nothing more. Here the image's ``alt`` names the figure (its panels' titles) and its
    ``aria-describedby`` points to the caption below it, which everyone sees.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        Drawn as PNG at its own dpi, trimmed as the inline backend trims it (``bbox_inches="tight"``).
    description : str
        What the figure shows, in words (plain text; escaped here).

    Returns
    -------
    str
        ``<figure>`` with the ``<img>`` (a ``data:`` URI) and its ``<figcaption>``.

    Raises
    ------
    ValueError
        If ``description`` is empty: every figure needs its text alternative.
    """
    import base64
    import html
    import hashlib
    import io

    _require_description(description)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", facecolor="white")
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    alt = "Figure: " + ("; ".join(titles) if titles else "see the caption below")
    # named after the picture and its words, not at random: the same figure gives the same HTML (graded notebooks
    # and feedback are compared byte for byte across runs)
    caption_id = "figure-caption-" + hashlib.sha1(buffer.getvalue() + description.encode()).hexdigest()[:16]
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" '
            f'aria-describedby="{caption_id}"><figcaption id="{caption_id}"><em>Figure.</em> '
            f"{html.escape(description)}</figcaption></figure>")


def show_figure(figure: Figure, description: str) -> None:
    """Show ``figure`` in the notebook with its text alternative (:func:`figure_html`), instead of ``plt.show()``.

    A pyplot figure is closed afterwards, so that the inline backend does not show it a second time without text.
    Under nbgrader (``NBGRADER_EXECUTION`` set: autograde, validate) the figure is not drawn and a one-line note
    is printed instead, as the explorers do (:func:`attention_lab.core.explorer.unless_grading`).

    Parameters
    ----------
    figure : matplotlib.figure.Figure
    description : str
        What the figure shows, in words; also the output's plain-text form.

    Raises
    ------
    ValueError
        If ``description`` is empty (also while grading).
    """
    import os
    import sys

    from IPython.display import display

    if os.environ.get("NBGRADER_EXECUTION"):
        # Drawing the PNG (layout, text, Agg rasterising: about half a CPU-second for three panels) is most of
        # what a figure costs, and no grade reads it: every graded kernel would pay it for every figure.
        _require_description(description)
        print("(the figure is not drawn while grading)")
    else:
        display({"text/html": figure_html(figure, description), "text/plain": description}, raw=True)
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(figure)
