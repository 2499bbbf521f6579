"""The base of every interactive visual of the course: controls, one figure shown as an image, one summary line.

A visual (``attention_lab/aNN_<topic>/visual.py``) says only what it draws:

* a :class:`ExplorerFigure` subclass builds its panels once and draws one
  view of the data, usually by blitting the artists that change onto a cached
  background;
* an :class:`Explorer` subclass makes its controls with :func:`control` (and
  :meth:`Explorer.seed_controls`), and implements ``settings`` (the controls'
  values), :meth:`Explorer.compute` (the data for those values, from the
  learner's functions, called through :func:`call_for_visual`) and
  :meth:`Explorer.render`; :meth:`Explorer.start` lays the controls out, makes
  every change redraw (coalesced, see :class:`~attention_lab.core.redraw.CoalescedRedraw`)
  and draws the first picture;
* its ``explore_*`` function returns :func:`unless_grading` of the explorer,
  so that nothing is drawn while nbgrader runs the notebook;
* an explorer of attention heatmaps subclasses :class:`HeatmapExplorer`, which
  keeps the learner's functions and makes the T slider and the control of the
  course's colour scales (:func:`colour_scale_control`); its figure draws them
  with :meth:`ExplorerFigure.add_weight_colour_bar` and
  :meth:`ExplorerFigure.show_colour_scale`.

Only public ipywidgets and matplotlib APIs are used.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure

from attention_lab.core.calls import call_learner
from attention_lab.core.plots import COLORMAP, COLOUR_SCALES, DEFAULT_COLOUR_SCALE, ColourScale
from attention_lab.core.redraw import CoalescedRedraw, image_widget, name_figure, png_bytes

#: Time limit of one call of a learner's function by a visual: an infinite loop becomes a message, not a frozen
#: kernel. Read at each call, so a test can shorten it.
CALL_SECONDS = 10.0
#: Every control's description is as wide as its text (the default cuts descriptions such as "logit size").
STYLE = {"description_width": "initial"}
DPI = 100  # dots per inch of every explorer figure: its width in pixels is its width in inches times 100
#: How many static backgrounds a figure that opts in keeps, by layout key (:meth:`ExplorerFigure.cache_background`):
#: moving back to a T or colour scale shown lately is then a blit instead of a full draw (100–200 ms at T = 512,
#: mostly tick labels). Each costs width × height × 4 bytes (1.7 MB at 1200 × 360 pixels).
BACKGROUNDS_KEPT = 12
#: The y of the explorers' Axes titles, in Axes fractions. Given explicitly (``set_title(..., y=TITLE_Y)``), it
#: spares every draw matplotlib's measuring of the Axes' tick labels to lift the title above any on top (15–20 %
#: of a full draw); no explorer Axes has ticks or an offset text on top, so the title lands where it would anyway.
TITLE_Y = 1.0
ERROR_COLOUR = "#B00020"


class ExplorerError(ValueError):
    """A learner's function given to a visual failed or returned the wrong thing; the message says which and how."""


def latest(function: Callable) -> Callable:
    """The current definition of a notebook function: re-running its cell rebinds the name.

    Parameters
    ----------
    function : callable
        A function defined in a notebook (its ``__globals__`` are the notebook's namespace).

    Returns
    -------
    callable
        What the function's name is bound to now in that namespace, or ``function``
        itself when the name is gone, is not callable, or the object has no globals.
    """
    namespace = getattr(function, "__globals__", None)
    name = getattr(function, "__name__", None)
    current = namespace.get(name) if namespace is not None and name else None
    return current if callable(current) else function


def function_name(function) -> str:
    """The name a message uses for a learner's function: its ``__name__``, or "the function"."""
    return getattr(function, "__name__", "the function")


def call_for_visual(function: Callable, *args, name: str | None = None, record_warnings: bool = False, **kwargs):
    """Call the current definition of a learner's function on copies of its array arguments, for a visual.

    Copies, because a function that modifies its input in place would
    otherwise change a visual's cached inputs or the data on screen. Output is
    discarded and the call is limited to :data:`CALL_SECONDS`.

    Parameters
    ----------
    function : callable
        The learner's function; :func:`latest` finds its current definition.
    *args, **kwargs
        Its arguments.
    name : str, optional
        The name the message uses (default: the function's own).
    record_warnings : bool
        Return ``(result, warnings)``: NumPy's default error handling (overflow,
        0/0 and log 0 warn; underflow does not) and every warning as
        ``"RuntimeWarning: overflow encountered in exp"``. Otherwise warnings are silenced.

    Returns
    -------
    object
        What the function returned (with ``record_warnings``, and the list of warnings).

    Raises
    ------
    ExplorerError
        Whatever the function raised, or a time-out after :data:`CALL_SECONDS`, as one
        message ``"<name> raised <error>"``.
    """
    caught: list | None = [] if record_warnings else None
    try:
        result = call_learner(latest(function), *args, seconds=CALL_SECONDS, copy_arrays=True,
                              record_warnings=caught, **kwargs)
    except Exception as error:  # noqa: BLE001 — whatever learners' code raises becomes one message
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise ExplorerError(f"{name or function_name(function)} raised {text}") from None
    if caught is None:
        return result
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def control(kind, description: str, value, tooltip: str | None = None, **options):
    """One labelled control of an explorer.

    Parameters
    ----------
    kind : type
        An ipywidgets value widget class (``IntSlider``, ``SelectionSlider``, ``Checkbox``, ``ToggleButtons``, …).
    description : str
        The label shown next to it.
    value
        Its initial value.
    tooltip : str, optional
        What it changes, shown on hover.
    **options
        Further traits (``min``, ``max``, ``options``, ``step``, ``tooltips``, …).

    Returns
    -------
    ipywidgets.ValueWidget
        The control, with the course's description style.
    """
    if tooltip is not None:
        options["tooltip"] = tooltip
    return kind(value=value, description=description, style=STYLE, **options)


def colour_scale_control(value: str = DEFAULT_COLOUR_SCALE):
    """The "colour scale" control of an explorer's attention heatmaps: one of :data:`~attention_lab.core.plots.COLOUR_SCALES`.

    Parameters
    ----------
    value : str
        The initial scale: "logarithmic" (the default: it keeps the causal triangle visible at T = 512, where
        every allowed weight is about 1/T), "linear 0–1" or "row-normalised".

    Returns
    -------
    ipywidgets.Dropdown

    Raises
    ------
    ValueError
        If ``value`` is not one of the scales; the message lists them.
    """
    import ipywidgets as widgets

    check_settings(colour_scale=(value, value in COLOUR_SCALES, f"one of {tuple(COLOUR_SCALES)}"))
    return control(widgets.Dropdown, "colour scale", value,
                   "how weights become colours: linear from 0 to 1; each row divided by its largest weight; or "
                   "log10 of the weight from 10⁻⁴ to 1 (at large T every weight is about 1/T)",
                   options=tuple(COLOUR_SCALES))


@dataclass(frozen=True, kw_only=True)
class HeatmapSettings:
    """The controls every attention-heatmap explorer has: the seed of its random inputs and the colour scale.

    An explorer's ``Settings`` (frozen, so that equal settings compare equal) subclasses it with its own controls,
    which it takes by position; these two are given by keyword: the seed slider's value (0 to 99) and the
    :func:`colour_scale_control`'s, one of :data:`~attention_lab.core.plots.COLOUR_SCALES`.
    """

    seed: int
    colour_scale: str = DEFAULT_COLOUR_SCALE  # one of core.plots.COLOUR_SCALES


def check_settings(**checks: tuple[object, bool, str]) -> None:
    """Check an explorer's initial settings, in the order given.

    Parameters
    ----------
    **checks : (value, ok, wanted)
        Per setting: its value, whether it is allowed, and what is allowed, in
        words ("between 2 and 512", "one of (1, 2, 4)").

    Raises
    ------
    ValueError
        For the first setting that is not allowed: ``"<name> must be <wanted>; received <value>"``.
    """
    for name, (value, ok, wanted) in checks.items():
        if not ok:
            raise ValueError(f"{name} must be {wanted}; received {value!r}")


def unless_grading(what: str, make: Callable, *args, **kwargs):
    """``make(*args, **kwargs)``, except under nbgrader, where a one-line note is printed and None returned.

    nbgrader sets ``NBGRADER_EXECUTION`` when it runs a notebook (autograde,
    validate): a visual's cell then never slows grading down nor adds widget
    output to a submission.

    Parameters
    ----------
    what : str
        The visual, as the note names it: "the attention explorer" prints
        "(the attention explorer is not shown while grading)".
    make : callable
        Builds the visual.

    Returns
    -------
    object or None
        What ``make`` returned, or None under nbgrader.
    """
    if os.environ.get("NBGRADER_EXECUTION"):
        print(f"({what} is not shown while grading)")
        return None
    return make(*args, **kwargs)


def largest_weight_text(weights: np.ndarray, causal: bool) -> str:
    """The summary's "largest weight" part: under the causal mask it skips row 0 and says so.

    Row 0 of causal attention has a single allowed key, so its weight is 1 whatever the scores are; the
    largest weight of the other rows is the one that says how focused the attention is.

    Parameters
    ----------
    weights : ndarray, shape (T, T), float
        One head's weights, rows = query positions.
    causal : bool
        Whether the causal mask was applied.

    Returns
    -------
    str
        ``"largest weight 0.412"``, or ``"largest weight outside row 0 (always 1 under the causal mask) 0.412"``
        (for T = 1 under the mask, row 0's weight).
    """
    if causal and weights.shape[0] > 1:
        return f"largest weight outside row 0 (always 1 under the causal mask) {weights[1:].max():.3f}"
    return f"largest weight {weights.max():.3f}"


def error_html(error) -> str:
    """A failure as the one red line an explorer shows in place of its summary."""
    return f"<span style='color:{ERROR_COLOUR}'>⚠ {error}</span>"


def reset_colour_bar_axes(ax, rect: tuple[float, float, float, float] | None) -> None:
    """Clear the Axes of a colour bar for a new one, back at ``rect``.

    A colour bar with ``extend`` (the log scale's triangle) shrinks its Axes through an axes locator, which
    ``clear()`` keeps: without resetting it, the next colour bar would be drawn as short as the triangle left it.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The ``cax`` of the colour bar being replaced.
    rect : (float, float, float, float) or None
        Its left, bottom, width and height in figure fractions; None: leave its position.
    """
    ax.clear()
    ax.set_axes_locator(None)
    if rect is not None:
        ax.set_position(rect)


class ExplorerFigure:
    """One persistent Agg figure of an explorer, encoded as PNG for an ``ipywidgets.Image``.

    Subclasses add their panels in ``__init__`` (after calling this one) with
    axes at fixed rectangles — a layout engine would re-measure every label on
    each redraw — and mark the artists that change as ``animated``. Static
    parts are drawn once by :meth:`cache_background` and each redraw
    :meth:`blit` s the animated artists onto them.

    Parameters
    ----------
    size : (float, float)
        Width and height in inches, at :data:`DPI` dots per inch.
    backgrounds_kept : int
        How many backgrounds :meth:`cache_background` keeps by their key (least recently used dropped first),
        default 1: only the current one. A figure opts in (e.g. :data:`BACKGROUNDS_KEPT`) only when its key
        names everything its static parts show, so that a kept background is what a full draw would draw.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    canvas : FigureCanvasAgg
    background : object or None
        The cached static parts (``canvas.copy_from_bbox``).
    layout_key : object or None
        What the cached background was drawn for (T, or (T, n_heads), …); None before the first.
    colour_scale : ColourScale or None
        What the attention heatmaps and their colour bar show (:meth:`show_colour_scale`); None before the first.
    """

    def __init__(self, size: tuple[float, float], *, backgrounds_kept: int = 1):
        self.figure = Figure(figsize=size, dpi=DPI, facecolor="white")
        self.canvas = FigureCanvasAgg(self.figure)
        self.background = None
        self.layout_key = None
        self.backgrounds_kept = backgrounds_kept
        self._kept_backgrounds: OrderedDict = OrderedDict()  # layout key → background, most recently used last
        self.colour_scale: ColourScale | None = None
        self.colour_bar_ax = None
        self._colour_bar_rect = None  # where add_weight_colour_bar put it
        self._colour_bar, self._colour_bar_stale = None, False
        #: The colour map of the weights' colour bar (a figure that draws its cells through another sets this).
        self.weight_colormap = colormaps[COLORMAP]

    def add_weight_colour_bar(self, rect: tuple[float, float, float, float]) -> None:
        """Reserve the Axes for the weights' colour bar, drawn by :meth:`show_colour_scale`.

        Parameters
        ----------
        rect : (float, float, float, float)
            Left, bottom, width and height in figure fractions.
        """
        self.colour_bar_ax = self.figure.add_axes(rect)
        self._colour_bar_rect = rect

    def show_colour_scale(self, scale: ColourScale, images: Iterable = ()) -> None:
        """Draw ``images`` and the colour bar on ``scale``; nothing when it is shown already.

        The colour bar is static: call this before :meth:`cache_background`, and re-cache when the scale
        changes (explorers make the scale part of :attr:`layout_key`). The caller draws
        ``scale.values(weights)`` into the images (row-normalised scales divide each row).

        Parameters
        ----------
        scale : ColourScale
            One of :data:`~attention_lab.core.plots.COLOUR_SCALES`.
        images : iterable of matplotlib.image.AxesImage
            The images of weights that map values through a norm; an image of precomputed RGBA colours
            (:meth:`ColourScale.colours`) needs none and is not passed.
        """
        if self.colour_scale == scale:
            return
        for image in images:
            image.set_norm(scale.norm())
        self.colour_scale = scale
        # Built when drawn (cache_background) or read: 15 ms a time, wasted when a kept background already shows it.
        self._colour_bar_stale = self.colour_bar_ax is not None

    @property
    def colour_bar(self):
        """The weights' colour bar (``matplotlib.colorbar.Colorbar``) on :attr:`colour_scale`, or None before the first."""
        if self._colour_bar_stale:
            self._build_colour_bar()
        return self._colour_bar

    @colour_bar.setter
    def colour_bar(self, value) -> None:
        self._colour_bar, self._colour_bar_stale = value, False

    def _build_colour_bar(self) -> None:
        scale = self.colour_scale
        reset_colour_bar_axes(self.colour_bar_ax, self._colour_bar_rect)
        self.colour_bar = self.figure.colorbar(ScalarMappable(scale.norm(), self.weight_colormap),
                                               cax=self.colour_bar_ax, label=scale.label, extend=scale.extend)

    @property
    def width_px(self) -> float:
        """The figure's width in pixels."""
        return self.figure.get_figwidth() * self.figure.dpi

    def cache_background(self, key) -> None:
        """Draw the static parts (animated artists are skipped) and keep them as the background for ``key``.

        With ``backgrounds_kept`` > 1, a background drawn before for an equal ``key`` is reused instead of
        drawing: the caller has set the figure up for ``key`` (limits, colour bar), which is what it was drawn from.
        """
        kept = self._kept_backgrounds
        if key in kept:
            kept.move_to_end(key)
            self.background, self.layout_key = kept[key], key
            return
        if self._colour_bar_stale:
            self._build_colour_bar()
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.figure.bbox)
        self.layout_key = key
        if self.backgrounds_kept > 1:
            kept[key] = self.background
            while len(kept) > self.backgrounds_kept:
                kept.popitem(last=False)

    def forget_backgrounds(self) -> None:
        """Drop every kept background but the one on screen (for tests and benchmarks: the next new key draws)."""
        self._kept_backgrounds.clear()
        if self.backgrounds_kept > 1 and self.background is not None:
            self._kept_backgrounds[self.layout_key] = self.background

    def blit(self, artists: Iterable) -> bytes:
        """Restore the cached background, draw ``artists`` on it and return the figure as PNG bytes."""
        self.canvas.restore_region(self.background)
        for artist in artists:
            self.figure.draw_artist(artist)
        return png_bytes(self.canvas)

    def png(self) -> bytes:
        """Draw the whole figure and return it as PNG bytes (for figures whose axes change with every view)."""
        self.canvas.draw()
        return png_bytes(self.canvas)


class Explorer(CoalescedRedraw):
    """Base of the course's explorers: controls above one figure shown as an image, and a summary line.

    A subclass creates its controls and its figure, calls this ``__init__``
    and then :meth:`start`; it implements ``settings`` and :meth:`compute`,
    and :meth:`render` unless its figure's ``render(settings, view)`` draws
    everything. Each change of a control redraws: :meth:`compute` on the
    learner's functions, then :meth:`render`. A failure of those functions
    (an :class:`ExplorerError`) blanks the figure and replaces the summary by
    one red message; everything else the view holds is drawn.

    Parameters
    ----------
    figure : ExplorerFigure
        The figure, built once; its width sets the image's width.
    sync : bool
        Redraw inside each change handler (tests) instead of merging changes
        that arrive while a redraw is pending (interactive use).

    Attributes
    ----------
    image : ipywidgets.Image
        The figure as PNG, replaced at each redraw.
    summary : ipywidgets.HTML
        The summary line, or the error message.
    view : object or None
        What :meth:`compute` returned for the controls on screen; None after a failure.
    error : str or None
        The failure's message, None when the view was computed.
    redraws : int
        How many redraws have run.
    widget : ipywidgets.VBox
        What the notebook displays (set by :meth:`start`).
    """

    def __init__(self, figure: ExplorerFigure, *, sync: bool):
        import ipywidgets as widgets

        self.figure = figure
        self.sync = sync
        self.image = image_widget(figure.width_px)
        self.summary = widgets.HTML()
        name_figure(self.image, self.summary)  # the summary line is the picture's text alternative
        self.view = None
        self.error: str | None = None
        self.redraws = 0
        self._inputs_seed, self._inputs = None, None

    @property
    def settings(self):
        """The controls' current values, as the subclass's frozen ``Settings`` dataclass."""
        raise NotImplementedError

    def compute(self, settings):
        """The data drawn for ``settings``, from the learner's functions.

        Raises
        ------
        ExplorerError
            When a learner's function fails; the message is shown instead of the summary.
        """
        raise NotImplementedError

    def render(self, settings) -> bytes:
        """Draw :attr:`view` (None after a failure) for ``settings`` and return the figure as PNG bytes.

        Here ``self.figure.render(settings, self.view)``; a subclass whose figure needs more overrides this.
        """
        return self.figure.render(settings, self.view)

    def summary_html(self, view) -> str:
        """The summary line for a computed view: its ``summary`` attribute (HTML)."""
        return view.summary

    def draw_inputs(self, seed: int):
        """The random inputs for ``seed``; subclasses that draw some override this (see :meth:`_current_inputs`)."""
        raise NotImplementedError

    def _current_inputs(self, seed: int):
        # Inputs are drawn once per seed (at the largest size, sliced by compute), so that only a control changes
        # the picture and most redraws draw nothing.
        if self._inputs_seed != seed:
            self._inputs_seed, self._inputs = seed, self.draw_inputs(seed)
        return self._inputs

    def seed_controls(self, seed: int, tooltip: str, button: str, button_tooltip: str):
        """A seed slider (0 … 99) and a button that moves it to the next seed.

        Parameters
        ----------
        seed : int
            Initial seed.
        tooltip, button_tooltip : str
            What the slider and the button change.
        button : str
            The button's label ("resample", "shuffle").

        Returns
        -------
        (ipywidgets.IntSlider, ipywidgets.Button)
        """
        import ipywidgets as widgets

        slider = control(widgets.IntSlider, "seed", seed, tooltip, min=0, max=99)
        next_seed = widgets.Button(description=button, tooltip=button_tooltip)
        next_seed.on_click(lambda _: setattr(slider, "value", (slider.value + 1) % 100))
        return slider, next_seed

    def start(self, rows: Sequence[Sequence], *, below: Sequence = (),
              follow: Sequence[tuple[object, Callable]] = ()) -> None:
        """Lay the controls out, make every change redraw, and draw the first picture.

        Parameters
        ----------
        rows : sequence of sequences of widgets
            The controls, one ``HBox`` per row, above the image and the summary.
            Every control except buttons redraws when its value changes.
        below : sequence of widgets
            Shown under the summary.
        follow : sequence of (control, callable)
            ``adjust(new_value)`` runs first when that control changes, to move
            other controls with it (keep a selected head or position in range);
            their own changes then make no second redraw.
        """
        import ipywidgets as widgets

        self.widget = widgets.VBox([widgets.HBox(list(row)) for row in rows] + [self.image, self.summary, *below])
        adjusters = {id(ctrl): adjust for ctrl, adjust in follow}
        for row in rows:
            for ctrl in row:
                if isinstance(ctrl, widgets.Button):
                    continue
                adjust = adjusters.get(id(ctrl))
                ctrl.observe(self._on_change if adjust is None else self._following(adjust), names="value")
        self.redraw()

    def _following(self, adjust: Callable):
        def on_change(change) -> None:
            with self._adjusting_controls():
                adjust(change["new"])
            self._on_change(change)

        return on_change

    def redraw(self) -> None:
        """Recompute for the current controls and update the image and summary in place."""
        settings = self.settings
        try:
            self.view = self.compute(settings)
            self.error = None
            self.summary.value = self.summary_html(self.view)
        except ExplorerError as error:
            self.view, self.error = None, str(error)
            self.summary.value = error_html(error)
        self.image.value = self.render(settings)
        self.redraws += 1


class HeatmapExplorer(Explorer):
    """Base of the explorers of attention heatmaps: the learner's functions, a T slider and the colour scale.

    Each of them draws the weights of the learner's ``functions`` over T query and key positions, for
    random inputs (:class:`HeatmapSettings`: a seed and the colour scale). A subclass checks its initial
    settings, calls this ``__init__``, makes its other controls and calls :meth:`start` with the two made here.

    Parameters
    ----------
    figure : ExplorerFigure
        The figure (see :class:`Explorer`).
    functions : sequence of callable
        The learner's functions it draws, kept in order as :attr:`functions`; they are called through
        :func:`call_for_visual`, so a re-run cell's new definition is the one used.
    T : int
        The initial number of query and key positions, 2 ≤ T ≤ ``T_max`` (checked by the subclass, whose
        message says what is allowed).
    T_max : int
        The largest T the slider offers.
    T_tooltip : str
        What T is, in the explorer's words ("sequence length: number of query and key positions").
    colour_scale : str
        The heatmaps' initial colour scale, one of :data:`~attention_lab.core.plots.COLOUR_SCALES`.
    sync : bool
        As for :class:`Explorer`.

    Attributes
    ----------
    functions : tuple of callable
    T_slider : ipywidgets.IntSlider
    colour_dropdown : ipywidgets.Dropdown
        :func:`colour_scale_control`.

    Raises
    ------
    ValueError
        If ``colour_scale`` is not one of the scales; the message lists them.
    """

    def __init__(self, figure: ExplorerFigure, functions: Sequence[Callable], *, T: int, T_max: int, T_tooltip: str,
                 colour_scale: str, sync: bool):
        import ipywidgets as widgets

        self.colour_dropdown = colour_scale_control(colour_scale)  # first: an unknown scale builds no widget
        super().__init__(figure, sync=sync)
        self.functions = tuple(functions)
        self.T_slider = control(widgets.IntSlider, "T", T, T_tooltip, min=2, max=T_max)
