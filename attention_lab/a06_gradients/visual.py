"""The gradient explorer: why √d_k, shown by the gradients the learner's own functions compute.

``explore_gradients(softmax_jacobian, softmax_backward)`` draws, for the chosen ``T`` (keys per
row) and ``d_head`` (marked on every curve):

* the softmax Jacobian's gain ‖J‖₂ against d_head for ÷1, ÷√d_k and ÷d_k, with a uniform row's 1/T
  dashed;
* the gradient reaching the scores (thin) and reaching Q (thick) for a fixed unit-variance upstream
  gradient, computed with the learner's ``softmax_backward``;
* the mean row entropy in nats, with the ceiling ln T dashed;
* one row's Jacobian J_ij = ∂p_i/∂s_j as a heatmap (the learner's ``softmax_jacobian`` on row 0
  behind the curves, for the chosen scaling), axes "key position" × "key position" (both indices are
  keys of the one query), diverging colours centred on 0.

The curves are computed once per T and learner's function (:mod:`attention_lab.a06_gradients.curves`
caches what does not depend on the function) and drawn once as a cached background; a change of d_head or
of the scaling moves the marker and recomputes one row's Jacobian, blitted onto it
(``benchmarks/explorer_latency.py`` measures both). Each learner's
function is looked up again by name before every redraw, so re-running a fixed cell is picked up.
"""

from __future__ import annotations

import math
import os

import numpy as np
from attention_lab.a01_attention.visual import latest
from attention_lab.a06_gradients.curves import D_HEADS, SCALINGS, Curves, ExperimentError, gradient_curves, row_weights
from attention_lab.core.calls import time_limit
from attention_lab.core.explorer import TITLE_Y, ExplorerFigure
from attention_lab.core.plots import CURVE_COLOURS, REFERENCE_COLOUR, SIGNED_COLORMAP
from attention_lab.core.redraw import CoalescedRedraw, image_widget, name_figure

T_OPTIONS = (4, 8, 16, 32, 64, 128)
COLOURS = dict(zip(("none", "sqrt", "linear"), CURVE_COLOURS))  # told apart in lightness (core.plots.CURVE_COLOURS)
FIGURE_SIZE = (14.0, 3.6)
DPI = 90
N_ROWS = 256
CALL_SECONDS = 20.0  # the whole experiment on a learner's softmax_backward; an endless loop becomes a message


class GradientFigure(ExplorerFigure):
    """The three curve panels and the heatmap at fixed rectangles; the curves are a cached background per T.

    A change to a T not shown before (or of the learner's function) draws the curves once and caches the
    background per T (:meth:`ExplorerFigure.cache_background`), so a return to that T blits too; a change of d_head or of the heatmap's scaling blits only what
    moves onto it: the d_head marker of each panel, the heatmap, its title and an error line. The heatmap shows
    J / max |J_ij| on a fixed diverging scale (white is 0); its title gives max |J_ij|, so the colour bar is
    static too.
    """

    def __init__(self):
        super().__init__((FIGURE_SIZE[0] * DPI / 100, FIGURE_SIZE[1] * DPI / 100))
        left, width, bottom, height = (0.06, 0.29, 0.52), 0.165, 0.15, 0.7
        self.gain_ax, self.gradient_ax, self.entropy_ax = (self.figure.add_axes((x, bottom, width, height))
                                                           for x in left)
        self.heat_ax = self.figure.add_axes((0.755, bottom, 0.135, height))
        self.heat_image = self.heat_ax.imshow(np.zeros((2, 2)), cmap=SIGNED_COLORMAP, vmin=-1, vmax=1,
                                              interpolation="nearest", animated=True)
        self.figure.colorbar(self.heat_image, cax=self.figure.add_axes((0.905, bottom, 0.01, height)),
                             label="∂p_i / ∂s_j ÷ max |J_ij|")
        self.heat_ax.set_xlabel("key position j")
        self.heat_ax.set_ylabel("key position i")
        self.heat_ax.title.set_animated(True)
        self.error_text = self.figure.text(0.5, 0.5, "", ha="center", va="center", color="#B00020", fontsize=11,
                                           wrap=True, animated=True)
        self.markers = []
        #: T → (the curves drawn, the background with them): a return to a T shown before is a blit (1.3 MB each)
        self._backgrounds: dict[int, tuple[Curves | None, object]] = {}

    def _build_panels(self) -> None:
        """The curve panels' artists, made once: a new T only changes their data (no axes cleared, so matplotlib
        keeps its tick objects; clearing and re-plotting cost 5x more)."""
        nowhere = np.array([1.0, 2.0]), np.array([np.nan, np.nan])
        self.lines = {}
        for key, label in SCALINGS.items():
            colour = COLOURS[key]
            self.lines["gain", key], = self.gain_ax.plot(*nowhere, color=colour, marker="o", ms=3, label=label)
            self.lines["score_gradient", key], = self.gradient_ax.plot(*nowhere, color=colour, lw=1, ls=":",
                                                                       label=f"{label}, at the scores")
            self.lines["query_gradient", key], = self.gradient_ax.plot(*nowhere, color=colour, lw=2.5,
                                                                       label=f"{label}, at Q")
            self.lines["entropy", key], = self.entropy_ax.plot(*nowhere, color=colour, marker="o", ms=3, label=label)
        self.uniform_line = self.gain_ax.axhline(np.nan, color=REFERENCE_COLOUR, ls="--", lw=1, label="uniform row, 1/T")
        self.ceiling_line = self.entropy_ax.axhline(np.nan, color=REFERENCE_COLOUR, ls="--", lw=1, label="ceiling ln T")
        self.markers = []
        for ax, title, ylabel in ((self.gain_ax, "softmax Jacobian gain ‖J‖₂", "‖J‖₂ (median over rows)"),
                                  (self.gradient_ax, "gradient norm (median over rows)", "‖gradient‖₂"),
                                  (self.entropy_ax, "mean row entropy", "entropy (nats)")):
            ax.set_xscale("log", base=2)
            ax.set_xlim(D_HEADS[0] / 1.3, D_HEADS[-1] * 1.3)
            ax.set_xlabel("d_head")
            ax.set_ylabel(ylabel)
            ax.set_title(title, fontsize=10, y=TITLE_Y)
            self.markers.append(ax.axvline(D_HEADS[0], color="0.2", lw=0.8, animated=True))
        self.gradient_ax.set_yscale("log")
        self.legends = [ax.legend(fontsize="x-small", frameon=False)
                        for ax in (self.gain_ax, self.gradient_ax, self.entropy_ax)]

    def _draw_curves(self, curves: Curves | None, error: str | None) -> None:
        """The static part for one T: the curves (hidden when they could not be computed) and the axes' limits."""
        if not hasattr(self, "lines"):
            self._build_panels()
        for (name, key), line in self.lines.items():
            line.set_visible(curves is not None)
            if curves is not None:
                line.set_data(curves.d_heads, getattr(curves, name)[key])
        for line, value in ((self.uniform_line, None if curves is None else 1.0 / curves.T),
                            (self.ceiling_line, None if curves is None else curves.ceiling)):
            line.set_visible(value is not None)
            if value is not None:
                line.set_ydata([value, value])
        if curves is not None:
            self.legends[2].get_texts()[-1].set_text(f"ceiling ln T = {curves.ceiling:.2f}")
        for legend in self.legends:
            legend.set_visible(curves is not None)
        if curves is None:  # nothing to scale to; a log axis still needs positive limits to draw its ticks
            self.gradient_ax.set_ylim(1e-3, 1.0)
            return
        for ax in (self.gain_ax, self.gradient_ax, self.entropy_ax):
            ax.relim(visible_only=True)
            ax.autoscale_view(scalex=False)

    def render(self, curves: Curves | None, d_head: int, scaling: str, jacobian: np.ndarray | None,
               largest: float, error: str | None) -> bytes:
        """Draw the curves (once per ``curves``), the marker at ``d_head``, the heatmap and ``error``; return PNG."""
        T = jacobian.shape[0] if jacobian is not None else curves.T if curves is not None else 2
        self.heat_image.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
        self.heat_ax.set_xlim(-0.5, T - 0.5)
        self.heat_ax.set_ylim(T - 0.5, -0.5)
        drawn = self._backgrounds.get(T)
        if drawn is not None and drawn[0] is curves:  # `is`: the figure holds the curves each background shows
            self.background, self.layout_key = drawn[1], T
        else:
            self._draw_curves(curves, error)  # the heatmap's ticks for this T are part of the background too
            self.cache_background(T)
            self._backgrounds[T] = (curves, self.background)
        for marker in self.markers:
            marker.set_xdata([d_head, d_head])
        if jacobian is not None:
            limit = max(float(np.max(np.abs(jacobian))), 1e-300)
            self.heat_image.set_data(jacobian / limit)
            gain = float(np.linalg.norm(jacobian, 2))
            self.heat_ax.set_title(f"J of one row, {SCALINGS[scaling]}, d_head = {d_head}\n‖J‖₂ {gain:.3g}, "
                                   f"max |J_ij| {limit:.3g}, top p {largest:.3g}", fontsize=7.5, y=TITLE_Y)
        else:
            self.heat_image.set_data(np.zeros((2, 2)))
            self.heat_ax.set_title("", fontsize=9, y=TITLE_Y)
        self.error_text.set_text("" if error is None else f"⚠ {error}")
        return self.blit([*self.markers, self.heat_image, self.heat_ax.title, self.error_text])


class GradientExplorer(CoalescedRedraw):
    """The widget: ``T``, ``d_head`` and scaling controls, the figure as an image, a summary line.

    Parameters
    ----------
    softmax_jacobian : callable
        ``softmax_jacobian(p)`` → (T, T) for one row p of shape (T,).
    softmax_backward : callable
        ``softmax_backward(p, grad_p)`` for (rows, T) arrays.
    T : one of :data:`T_OPTIONS`
    d_head : one of ``D_HEADS`` (1 … 512)
    scaling : {"none", "sqrt", "linear"}
        The scaling of the heatmap's row.
    sync : bool
        Redraw inside each change handler (tests).

    Raises
    ------
    ValueError
        If an initial setting is out of range.
    """

    def __init__(self, softmax_jacobian, softmax_backward, *, T=32, d_head=64, scaling="none", sync=False):
        import ipywidgets as widgets

        if T not in T_OPTIONS:
            raise ValueError(f"T must be one of {T_OPTIONS}; received {T!r}")
        if d_head not in D_HEADS:
            raise ValueError(f"d_head must be one of {D_HEADS}; received {d_head!r}")
        if scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {sorted(SCALINGS)}; received {scaling!r}")
        self.functions = (softmax_jacobian, softmax_backward)
        self.sync = sync
        style = {"description_width": "initial"}
        self.T_slider = widgets.SelectionSlider(options=T_OPTIONS, value=T, description="T (keys)", style=style)
        self.d_head_slider = widgets.SelectionSlider(options=D_HEADS, value=d_head, description="d_head", style=style)
        self.scaling_buttons = widgets.ToggleButtons(options=[(label, key) for key, label in SCALINGS.items()],
                                                     value=scaling, description="heatmap", style=style)
        self.image = image_widget(FIGURE_SIZE[0] * DPI)
        self.summary = widgets.HTML()
        name_figure(self.image, self.summary)  # the summary line is the picture's text alternative
        self.widget = widgets.VBox([widgets.HBox([self.T_slider, self.d_head_slider]), self.scaling_buttons,
                                    self.image, self.summary])
        self.figure = GradientFigure()
        self.curves: Curves | None = None
        self.curves_error: str | None = None
        self._curves_by_T: dict[int, tuple[Curves | None, str | None]] = {}
        self._curves_of = None
        self.jacobian: np.ndarray | None = None
        self.error: str | None = None
        self.redraws = 0
        for control in (self.T_slider, self.d_head_slider, self.scaling_buttons):
            control.observe(self._on_change, names="value")
        self.redraw()

    def _compute_curves(self, T: int) -> None:
        """The curves of T on the learner's current softmax_backward: computed once per (T, function), so going
        back to a T is free; a redefined function (its cell re-run) computes them again."""
        backward = latest(self.functions[1])
        if backward is not self._curves_of:
            self._curves_by_T, self._curves_of = {}, backward
        if T not in self._curves_by_T:
            try:
                with time_limit(CALL_SECONDS):
                    self._curves_by_T[T] = gradient_curves(backward, T=T, n_rows=N_ROWS), None
            except Exception as error:  # noqa: BLE001 — whatever the learner's code does becomes one message
                message = str(error) if isinstance(error, ExperimentError) else f"{type(error).__name__}: {error}"
                self._curves_by_T[T] = None, message
        self.curves, self.curves_error = self._curves_by_T[T]

    def _row_jacobian(self, T: int, d_head: int, scaling: str) -> np.ndarray:
        p = row_weights(d_head, T, scaling, n_rows=N_ROWS)
        try:
            with time_limit(CALL_SECONDS):
                J = latest(self.functions[0])(p.copy())
        except Exception as error:  # noqa: BLE001
            raise ExperimentError(f"softmax_jacobian raised {type(error).__name__}: {error}") from None
        if not isinstance(J, np.ndarray) or J.shape != (T, T) or J.dtype.kind != "f":
            got = f"shape {J.shape}" if isinstance(J, np.ndarray) else type(J).__name__
            raise ExperimentError(f"softmax_jacobian(p) for p of shape ({T},) returned {got}; expected ({T}, {T})")
        return np.asarray(J, dtype=np.float64)

    def redraw(self) -> None:
        """Recompute what the controls changed and update the image and the summary in place."""
        T, d_head, scaling = self.T_slider.value, self.d_head_slider.value, self.scaling_buttons.value
        self._compute_curves(T)
        try:
            self.jacobian, self.error = self._row_jacobian(T, d_head, scaling), self.curves_error
        except ExperimentError as error:
            self.jacobian, self.error = None, str(error)
        self.summary.value = self.describe(T, d_head, scaling)
        largest = float(row_weights(d_head, T, scaling, n_rows=N_ROWS).max())
        self.image.value = self.figure.render(self.curves, d_head, scaling, self.jacobian, largest, self.error)
        self.redraws += 1

    def describe(self, T: int, d_head: int, scaling: str) -> str:
        """The summary line (HTML): the three curves' values at the chosen d_head, or what went wrong."""
        if self.error is not None:
            return f"<span style='color:#B00020'>⚠ {self.error}</span>"
        i = int(np.flatnonzero(self.curves.d_heads == d_head)[0])
        parts = [f"{label}: ‖J‖₂ {self.curves.gain[key][i]:.3g}, gradient at Q {self.curves.query_gradient[key][i]:.3g}, "
                 f"entropy {self.curves.entropy[key][i]:.2f} nats" for key, label in SCALINGS.items()]
        return (f"T = {T}, d_head = {d_head} (ceiling ln T = {math.log(T):.2f} nats; uniform row ‖J‖₂ = 1/T = "
                f"{1 / T:.3g})<br>" + "<br>".join(parts))


def explore_gradients(softmax_jacobian, softmax_backward, **settings):
    """Show the gradient explorer for the given functions (see :class:`GradientExplorer`).

    Under nbgrader (``NBGRADER_EXECUTION`` set: autograde, validate) nothing is shown and None is
    returned, so the cell never slows grading down or adds widget output to submissions.

    Returns
    -------
    GradientExplorer or None
    """
    if os.environ.get("NBGRADER_EXECUTION"):
        print("(the gradient explorer is not shown while grading)")
        return None
    return GradientExplorer(softmax_jacobian, softmax_backward, **settings)
