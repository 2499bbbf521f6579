"""Static plots of the notebooks (attention weights, row entropies, heatmaps), with the course's axis conventions.

Rows are query positions and columns key positions; weights use a fixed
0…1 colour range on the colour-blind-safe ``viridis`` map so that pictures
are comparable across settings; entropy is in nats. Each plot draws into the
Axes it is given, or into a new figure's (which the notebook shows when the
Axes' figure is the cell's last expression). The live explorers draw with
:mod:`attention_lab.core.explorer` instead.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

COLORMAP = "viridis"  # perceptually uniform and colour-blind safe; every attention heatmap uses it


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
            labels: tuple[str, str, str], size: tuple[float, float] = (4.2, 3.4)) -> Axes:
    """Draw a 2-D array as a heatmap on a fixed colour range, with a labelled colour bar.

    Parameters
    ----------
    values : numpy.ndarray, 2-D
        Row i is drawn at y = i, from the top.
    ax : matplotlib Axes or None
        Where to draw (None: a new figure of ``size`` inches).
    title, cmap : str
    limits : (float, float)
        The values at the two ends of the colour map, the same for every picture.
    labels : (str, str, str)
        The x axis, the y axis and the colour bar.

    Returns
    -------
    matplotlib.axes.Axes
        The heatmap's Axes; its figure also holds the colour bar.
    """
    ax = axes_or_new(ax, size)
    image = ax.imshow(values, cmap=cmap, vmin=limits[0], vmax=limits[1], interpolation="nearest", aspect="auto")
    xlabel, ylabel, colorbar_label = labels
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax


def plot_attention_weights(weights, ax: Axes | None = None, title: str = "attention weights") -> Axes:
    """Draw a ``(T_q, T_k)`` weight matrix as a heatmap: query positions down, key positions across, 0…1.

    Parameters
    ----------
    weights : array_like, shape (T_q, T_k), float in [0, 1]
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str

    Returns
    -------
    matplotlib.axes.Axes
        With a colour bar labelled "weight".

    Raises
    ------
    ValueError
        If ``weights`` is not 2-D.
    """
    return heatmap(checked_array(weights, 2, "weights", "(T_q, T_k)"), ax, title=title, cmap=COLORMAP,
                   limits=(0.0, 1.0), labels=("key position", "query position", "weight"))


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
        Query position across, entropy in nats up, with a legend.

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
    ax.legend(loc="lower right", fontsize="small")
    return ax
