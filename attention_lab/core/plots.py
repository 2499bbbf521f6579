"""Plots of attention weights and row entropies, with the course's axis conventions.

Rows are query positions and columns key positions; weights use a fixed
0…1 colour range on the colour-blind-safe ``viridis`` map so that pictures
are comparable across settings; entropy is in nats.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

COLORMAP = "viridis"  # perceptually uniform and colour-blind safe; every attention heatmap uses it


def _axes(ax: Axes | None, size=(4.2, 3.4)) -> Axes:
    if ax is not None:
        return ax
    figure = Figure(figsize=size, layout="constrained")
    return figure.add_subplot()


def plot_attention_weights(weights, ax: Axes | None = None, title: str = "attention weights") -> Axes:
    """Draw a ``(T_q, T_k)`` weight matrix as a heatmap.

    Parameters
    ----------
    weights : array_like, shape (T_q, T_k), float in [0, 1]
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when omitted (it is displayed by
        the notebook when the Axes' figure is the cell's last expression).
    title : str

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``weights`` is not 2-D.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must have shape (T_q, T_k); received shape {weights.shape}")
    ax = _axes(ax)
    image = ax.imshow(weights, cmap=COLORMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, label="weight")
    return ax


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
    label : str
        Legend label of the entropy curve.
    show_ceiling : bool
        Draw the dashed ceiling (pass False when adding a second curve to the same Axes).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``entropy`` is not 1-D.
    """
    entropy = np.asarray(entropy, dtype=float)
    if entropy.ndim != 1:
        raise ValueError(f"entropy must have shape (T_q,); received shape {entropy.shape}")
    ax = _axes(ax, size=(4.2, 3.0))
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
