"""The visual of assignment 9: what each head of the trained tiny GPT does, on task sequences, and what zeroing it costs.

``explore_heads(model_forward, params, config)`` runs the given ``model_forward`` — the learner's own at the end of
assignment 9, one written out in NumPy in the self-study notebook — on sequences of the training task (BOS, then a block of
L distinct random tokens repeated) and shows:

* the attention map of one layer and head over (query position, key position) on one sequence, chosen by its seed
  and block length L; red circles mark, in each row whose token occurred before, the key right after that earlier
  occurrence — the answer, where an induction head looks;
* what the head does on :data:`~.heads.N_MEASURE` fresh sequences: its mean weight on the previous token, on the
  earlier occurrences of the current token, right after them, on BOS and on itself, and its mean entropy as a
  fraction of the uniform ceiling ln(t + 1) — with a sentence saying what these show, by the thresholds of the
  course's findings (nothing is claimed that is not measured);
* the ablation: next-token accuracy on the predictable targets of those sequences with nothing zeroed and with each
  head zeroed, the selected head's bar highlighted, and the same on the sequence shown, in the summary line.

How the weights are read from ``model_forward`` (its KV caches, with one parameter substituted) and how a head is
zeroed is described in :mod:`.heads`. Everything is computed once per definition of ``model_forward`` (a re-run
cell is picked up) and once per sequence, so that moving a control only selects and draws. A ``model_forward``
that raises, hangs or returns the wrong thing is reported in one red line in place of the summary, and the panels
are left empty. The summary line is the picture's text alternative.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from attention_lab.core.explorer import (Explorer, ExplorerError, ExplorerFigure, call_for_visual, check_settings,
                                         colour_scale_control, control, function_name, latest, unless_grading)
from attention_lab.core.plots import COLOUR_SCALES, CURVE_COLOURS, REFERENCE_COLOUR, colour_scale_named

from . import heads as H

DEFAULT_SCALE = "linear 0–1"  # the trained heads are sharp; at T = 32 the diffuse heads' 1/t stays visible
FIGURE_SIZE = (13.0, 4.3)  # inches at DPI dots per inch
# (left, bottom, width, height) in figure fractions: fixed, a layout engine would re-measure every label per redraw
MAP_RECT, BAR_RECT = (0.045, 0.12, 0.25, 0.76), (0.3, 0.12, 0.008, 0.76)
PATTERN_RECT, ABLATION_RECT = (0.405, 0.2, 0.25, 0.68), (0.73, 0.2, 0.26, 0.68)
HIGHLIGHT = "#CC3311"  # the selected head's bar and the answer circles (Tol's vibrant red), as assignment 2's explorer
BAR = CURVE_COLOURS[1]  # light: the highlight and the black threshold line differ from it in lightness
PATTERN_LABELS = ("previous\ntoken", "earlier\noccurr.", "after\noccurr.", "BOS", "itself", "entropy\n÷ ln(t+1)")
SUMMARY_TOKENS = 32  # the summary lists the model's inputs (block_size tokens), not the last target


class HeadsError(ExplorerError):
    """The ``model_forward`` given to the explorer failed or returned something other than (logits, caches)."""


@dataclass(frozen=True)
class Settings:
    """One state of the explorer's controls."""

    seed: int
    block_length: int
    layer: int
    head: int
    colour_scale: str = DEFAULT_SCALE


@dataclass
class Measured:
    """What one definition of ``model_forward`` gives on the fresh sequences and on the sequences shown so far."""

    function: Callable
    measures: H.HeadMeasures
    sequences: dict  # (seed, block_length) → (tokens (T + 1,), forward_calls(...) on tokens[:-1])


@dataclass
class View:
    """Everything drawn for one :class:`Settings`.

    Attributes
    ----------
    tokens : numpy.ndarray of int, shape (T + 1,)
        The sequence shown: the model's T inputs and the last target.
    weights : numpy.ndarray of float, shape (T, T)
        The selected head's weights on it, rows = query positions.
    answers : (numpy.ndarray, numpy.ndarray) of int
        (query, key) positions right after an earlier occurrence of the query's token.
    pattern_values : numpy.ndarray, shape (6,)
        The head's five pattern scores and its normalised entropy, on the fresh sequences.
    accuracy : numpy.ndarray, shape (1 + n_layers · n_heads,)
        Accuracy on the fresh sequences' predictable targets: nothing zeroed, then each head zeroed.
    sequence_right : (int, int, int)
        On the sequence shown: predictable targets right with nothing zeroed, with the selected head zeroed, and
        how many there are.
    description : str
        :func:`~.heads.describe_head`.
    summary : str
    """

    tokens: np.ndarray
    weights: np.ndarray
    answers: tuple
    pattern_values: np.ndarray
    accuracy: np.ndarray
    sequence_right: tuple
    description: str
    summary: str = ""


def task_sequence(seed: int, block_length: int, config: Mapping) -> np.ndarray:
    """The sequence of the training task for ``seed`` with block length L: block_size + 1 tokens, BOS first.

    Returns
    -------
    numpy.ndarray of int64, shape (block_size + 1,)
        The model's inputs are the first block_size, each next token is the target of the position before it.
    """
    tokens, _ = H.repeated_blocks(1, int(config["block_size"]) + 1, int(config["vocab_size"]),
                                  (block_length, block_length), np.random.default_rng(seed))
    return tokens[0]


def measurement_sequences(config: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """The :data:`~.heads.N_MEASURE` fresh sequences (block_size + 1 tokens) and their block lengths."""
    return H.repeated_blocks(H.N_MEASURE, int(config["block_size"]) + 1, int(config["vocab_size"]),
                             H.BLOCK_LENGTHS, np.random.default_rng(H.MEASURE_SEED))


def run_model(model_forward: Callable, params: Mapping, config: Mapping, inputs: np.ndarray) -> dict:
    """:func:`~.heads.forward_calls` on ``inputs`` (n, T), each sequence through one :func:`call_for_visual`.

    Each sequence's forward passes (7 for the committed model) share one time limit
    (:data:`~attention_lab.core.explorer.CALL_SECONDS`), so that a correct but slow ``model_forward`` is given
    time for the 32 measurement sequences while a hanging one is stopped after one limit.

    Returns
    -------
    dict
        ``"weights"`` (n, n_layers, n_heads, T, T) and ``"predictions"`` (n, 1 + n_layers · n_heads, T), as
        :func:`~.heads.forward_calls`.

    Raises
    ------
    HeadsError
        If ``model_forward`` raises, hangs, or returns something other than (logits, caches) of its API.
    """
    name = function_name(model_forward)
    function = latest(model_forward)

    def calls_on(row):
        try:
            return H.forward_calls(function, params, config, row, name)
        except H.ModelError as error:  # returned, so that the message is not "… raised ModelError: …"
            return error

    results = []
    for row in inputs:
        try:
            result = call_for_visual(calls_on, row[None], name=name)
        except ExplorerError as error:
            raise HeadsError(str(error)) from None
        if isinstance(result, H.ModelError):
            raise HeadsError(str(result))
        results.append(result)
    return {key: np.concatenate([result[key] for result in results]) for key in ("weights", "predictions")}


def token_text(tokens: np.ndarray) -> str:
    """"BOS 3 17 8 …": the tokens as the summary lists them."""
    return " ".join("BOS" if t == H.BOS else str(int(t)) for t in tokens)


class HeadsFigure(ExplorerFigure):
    """The attention map, the head's pattern scores and the ablation bars, redrawn by blitting.

    Parameters
    ----------
    config : mapping
        The model's sizes: T = block_size query and key positions, n_layers × n_heads ablation bars.
    n_predictable : int
        Predictable targets of the fresh sequences (the ablation panel's title).
    """

    def __init__(self, config: Mapping, n_predictable: int):
        super().__init__(FIGURE_SIZE)
        T, layers, heads = int(config["block_size"]), int(config["n_layers"]), int(config["n_heads"])
        self.n_heads = heads
        self.backgrounds: dict = {}  # colour scale name → its static background
        self.map_ax = self.figure.add_axes(MAP_RECT)
        self.image = self.map_ax.imshow(np.zeros((T, T)), interpolation="nearest", aspect="auto", animated=True,
                                        extent=(-0.5, T - 0.5, T - 0.5, -0.5))
        self.map_ax.set_xlabel("key position")
        self.map_ax.set_ylabel("query position")
        for axis in (self.map_ax.xaxis, self.map_ax.yaxis):
            axis.set_major_locator(MaxNLocator(integer=True, nbins="auto"))
        self.map_title = self.map_ax.set_title("", fontsize=10, animated=True)
        (self.answers,) = self.map_ax.plot([], [], "o", markersize=4.5, markerfacecolor="none",
                                           markeredgecolor=HIGHLIGHT, markeredgewidth=1.0, animated=True)
        self.add_weight_colour_bar(BAR_RECT)

        self.pattern_ax = self.figure.add_axes(PATTERN_RECT)
        place = np.arange(len(PATTERN_LABELS))
        self.pattern_bars = list(self.pattern_ax.bar(place, np.zeros(len(place)), width=0.7, color=BAR,
                                                     animated=True))
        self.pattern_ax.set_xticks(place, PATTERN_LABELS, fontsize=8)
        self.pattern_ax.set_ylim(0, 1.45)  # the band above 1 holds the legend
        self.pattern_ax.set_yticks(np.linspace(0, 1, 6))
        self.pattern_ax.set_ylabel("mean weight (entropy: fraction)")
        # static (laying out a text costs about as much as the rest of a redraw): the map's title names the head
        self.pattern_ax.set_title("what the selected head does", fontsize=10)
        threshold = self.pattern_ax.axhline(H.PREVIOUS_MIN, color=REFERENCE_COLOUR, linestyle="--", lw=1.0)
        self.pattern_ax.legend(handles=[Rectangle((0, 0), 1, 1, color=BAR), threshold],
                               labels=[f"on {H.N_MEASURE} fresh sequences", f"{H.PREVIOUS_MIN}: a pattern a head "
                                       "follows"], loc="upper center", ncol=1, fontsize="small", handlelength=1.5)

        self.ablation_ax = self.figure.add_axes(ABLATION_RECT)
        names = ["none"] + [f"L{layer}H{head}" for layer in range(layers) for head in range(heads)]
        place = np.arange(len(names))
        self.ablation_bars = list(self.ablation_ax.bar(place, np.zeros(len(place)), width=0.7, color=BAR,
                                                       animated=True))
        self.ablation_ax.set_xticks(place, names, fontsize=9)
        self.ablation_ax.set_xlabel("head zeroed")
        self.ablation_ax.set_ylim(0, 1.3)  # the band above 100 % holds the legend
        self.ablation_ax.set_yticks(np.linspace(0, 1, 6), [f"{p:.0%}" for p in np.linspace(0, 1, 6)])
        self.ablation_ax.set_ylabel("next-token accuracy")
        self.ablation_ax.set_title(f"zero a head: accuracy on {n_predictable} predictable targets", fontsize=9)
        self.ablation_ax.legend(handles=[Rectangle((0, 0), 1, 1, color=BAR), Rectangle((0, 0), 1, 1, color=HIGHLIGHT)],
                                labels=["nothing or another head zeroed", "the selected head zeroed"],
                                loc="upper center", ncol=1, fontsize="small")

    def use_colour_scale(self, name: str) -> None:
        """Make ``name`` the colour scale of the map and its colour bar; a background drawn before is reused.

        Each scale's static background (its colour bar) is drawn once and kept, so that changing the scale is a
        blit like any other control (a full draw of this figure takes about 0.3 s, see
        ``benchmarks/heads_explorer_latency.md``).
        """
        if self.layout_key == name:
            return
        if name in self.backgrounds:
            scale = colour_scale_named(name)
            self.image.set_norm(scale.norm())
            self.background, self.layout_key = self.backgrounds[name], name
            self.colour_scale = scale  # what the kept background's colour bar shows
            return
        self.show_colour_scale(colour_scale_named(name), [self.image])
        self.cache_background(name)
        self.backgrounds[name] = self.background

    def prepare_colour_scales(self, first: str) -> None:
        """Draw the background of every colour scale now, ending with ``first`` (see :meth:`use_colour_scale`)."""
        for name in [*(n for n in COLOUR_SCALES if n != first), first]:
            self.use_colour_scale(name)

    @property
    def animated(self) -> list:
        """The artists drawn at each redraw."""
        return [self.image, self.map_title, self.answers, *self.pattern_bars, *self.ablation_bars]

    def render(self, settings: Settings, view: View | None) -> bytes:
        """Draw one view (empty panels when ``view`` is None) onto the cached background; return PNG bytes."""
        self.use_colour_scale(settings.colour_scale)
        name = f"L{settings.layer}H{settings.head}"
        zeroed = 1 + settings.layer * self.n_heads + settings.head  # the bars: none, L0H0, L0H1, …
        if view is None:
            T = self.image.get_array().shape[0]
            self.image.set_data(np.full((T, T), np.nan))
            self.map_title.set_text(f"{name}: no weights (see the message below)")
            self.answers.set_data([], [])
            for bar in self.pattern_bars + self.ablation_bars:
                bar.set_height(0.0)
        else:
            self.image.set_data(self.colour_scale.values(view.weights))
            self.map_title.set_text(f"{name} on the sequence of seed {settings.seed}, L = {settings.block_length}")
            self.answers.set_data(view.answers[1], view.answers[0])
            for bar, value in zip(self.pattern_bars, view.pattern_values):
                bar.set_height(float(value))
            for index, (bar, value) in enumerate(zip(self.ablation_bars, view.accuracy)):
                bar.set_height(float(value))
                bar.set_color(HIGHLIGHT if index == zeroed else BAR)
        return self.blit(self.animated)


class HeadsExplorer(Explorer):
    """The widget: sequence seed, block length, layer, head and colour scale above the figure and a summary line.

    Parameters
    ----------
    model_forward : callable
        ``model_forward(params, tokens, config, caches=None) -> (logits (T, vocab_size), caches)``, each layer's
        cache (K, V) of shape (n_heads, T, d_head): the learner's API of assignment 9.
    params : mapping of str to numpy.ndarray
        The trained parameters (``attention_lab.a09_tiny_gpt.weights.load_weights``).
    config : mapping
        ``vocab_size``, ``block_size``, ``n_heads``, ``n_layers``, ``ln_eps``.
    seed : int
        Initial seed of the sequence shown, 0 … 99.
    block_length : int
        Initial block length L, within the training range :data:`~.heads.BLOCK_LENGTHS`.
    layer, head : int
        The head initially selected.
    colour_scale : str
        One of :data:`~attention_lab.core.plots.COLOUR_SCALES`.
    sync : bool
        True: redraw inside each change handler (tests); see :class:`~attention_lab.core.explorer.Explorer`.

    Raises
    ------
    ValueError
        If ``params`` or ``config`` lack what the model needs, or a setting is out of range; the message names it.
    """

    def __init__(self, model_forward: Callable, params: Mapping, config: Mapping, *, seed: int = 0,
                 block_length: int = 5, layer: int = 1, head: int = 0, colour_scale: str = DEFAULT_SCALE,
                 sync: bool = False):
        import ipywidgets as widgets

        missing = [key for key in ("vocab_size", "block_size", "n_heads", "n_layers", "ln_eps")
                   if not isinstance(config, Mapping) or key not in config]
        check_settings(config=(config, not missing, f"a mapping with {', '.join(missing)}"))
        layers, n_heads = int(config["n_layers"]), int(config["n_heads"])
        needed = ["W_emb"] + [f"block{i}.{w}" for i in range(layers) for w in ("W_q", "W_k", "W_o")]
        absent = [key for key in needed if not isinstance(params, Mapping) or key not in params]
        check_settings(params=(type(params).__name__ if absent else "…", not absent,
                               f"a mapping of parameter arrays with {', '.join(absent[:4])}"))
        low, high = H.BLOCK_LENGTHS
        integer = lambda v, a, b: isinstance(v, int) and not isinstance(v, bool) and a <= v <= b  # noqa: E731
        check_settings(seed=(seed, integer(seed, 0, 99), "an integer from 0 to 99"),
                       block_length=(block_length, integer(block_length, low, high),
                                     f"an integer from {low} to {high} (the training task's block lengths)"),
                       layer=(layer, integer(layer, 0, layers - 1), f"an integer from 0 to {layers - 1}"),
                       head=(head, integer(head, 0, n_heads - 1), f"an integer from 0 to {n_heads - 1}"))
        self.colour_dropdown = colour_scale_control(colour_scale)
        self.params, self.config, self.model_forward = dict(params), dict(config), model_forward
        self.measure_tokens, self.measure_lengths = measurement_sequences(config)
        n_predictable = int(H.predictable_targets(self.measure_lengths, self.measure_tokens.shape[1]).sum())
        super().__init__(HeadsFigure(config, n_predictable), sync=sync)
        self.figure.prepare_colour_scales(colour_scale)
        self.measured: Measured | None = None
        self.seed_slider, self.resample = self.seed_controls(seed, "which sequence of the task is shown",
                                                             "next sequence", "show the sequence of the next seed")
        self.length_slider = control(widgets.IntSlider, "block length L", block_length,
                                     "how many distinct tokens the repeated block has", min=low, max=high)
        self.layer_buttons = control(widgets.ToggleButtons, "layer", layer, "the block whose head is shown",
                                     options=tuple(range(layers)))
        self.head_buttons = control(widgets.ToggleButtons, "head", head, "the head shown and zeroed",
                                    options=tuple(range(n_heads)))
        self.start([[self.seed_slider, self.resample, self.length_slider],
                    [self.layer_buttons, self.head_buttons, self.colour_dropdown]])

    @property
    def settings(self) -> Settings:
        """The controls' current values."""
        return Settings(self.seed_slider.value, self.length_slider.value, self.layer_buttons.value,
                        self.head_buttons.value, self.colour_dropdown.value)

    def measurements(self) -> Measured:
        """The fresh sequences' measurements for the current definition of ``model_forward`` (computed once)."""
        function = latest(self.model_forward)
        if self.measured is None or self.measured.function is not function:
            calls = run_model(self.model_forward, self.params, self.config, self.measure_tokens[:, :-1])
            measures = H.measure(calls["weights"], calls["predictions"], self.measure_tokens, self.measure_lengths)
            self.measured = Measured(function, measures, {})
        return self.measured

    def sequence(self, seed: int, block_length: int) -> tuple[np.ndarray, dict]:
        """The sequence of (seed, L) and the forward passes on it (computed once per definition and sequence)."""
        measured = self.measurements()
        key = (seed, block_length)
        if key not in measured.sequences:
            tokens = task_sequence(seed, block_length, self.config)
            if len(measured.sequences) >= 64:  # a long session keeps the latest sequences only
                measured.sequences.pop(next(iter(measured.sequences)))
            measured.sequences[key] = (tokens, run_model(self.model_forward, self.params, self.config,
                                                         tokens[None, :-1]))
        return measured.sequences[key]

    def compute(self, settings: Settings) -> View:
        """The map, the scores and the accuracies for ``settings``.

        Raises
        ------
        HeadsError
            When ``model_forward`` fails (the message is shown instead of the summary).
        """
        s = settings
        measures = self.measurements().measures
        tokens, calls = self.sequence(s.seed, s.block_length)
        heads = int(self.config["n_heads"])
        zeroed = 1 + s.layer * heads + s.head
        inputs = tokens[None, :-1]
        mask, defined = H.pattern_keys(inputs)["induction"]
        answers = np.nonzero(mask[0] & defined[0][:, None])
        predictable = H.predictable_targets([s.block_length], len(tokens))[0]
        right = calls["predictions"][0] == tokens[1:]
        values = np.array([measures.scores[p][s.layer, s.head] for p in H.PATTERNS]
                          + [measures.entropy[s.layer, s.head]])
        view = View(tokens, calls["weights"][0, s.layer, s.head], answers, values, measures.accuracy,
                    (int(right[0][predictable].sum()), int(right[zeroed][predictable].sum()), int(predictable.sum())),
                    H.describe_head(measures, s.layer, s.head))
        view.summary = self.summary_text(view, s)
        return view

    def summary_text(self, view: View, s: Settings) -> str:
        """The summary line: the sequence, what the head does, and what zeroing it costs, here and on fresh sequences."""
        name = f"L{s.layer}H{s.head}"
        before, after, n = view.sequence_right
        zeroed = 1 + s.layer * int(self.config["n_heads"]) + s.head
        return html.escape(
            f"Sequence of seed {s.seed}, block length L = {s.block_length}: {token_text(view.tokens[:SUMMARY_TOKENS])}. "
            f"On {H.N_MEASURE} fresh sequences, {view.description} Zeroing {name} changes next-token accuracy on "
            f"their predictable targets from {view.accuracy[0]:.1%} to {view.accuracy[zeroed]:.1%}; on this "
            f"sequence from {before}/{n} to {after}/{n} right.")


def explore_heads(model_forward: Callable, params: Mapping, config: Mapping, **settings):
    """Show what each head of the tiny GPT does and what zeroing it costs (see :class:`HeadsExplorer`).

    Parameters
    ----------
    model_forward : callable
        ``model_forward(params, tokens, config, caches=None) -> (logits, caches)`` — the learner's own works.
    params : mapping of str to numpy.ndarray
    config : mapping
        As ``attention_lab.a09_tiny_gpt.weights.load_weights`` returns them.
    **settings
        ``seed``, ``block_length``, ``layer``, ``head``, ``colour_scale``.

    Returns
    -------
    HeadsExplorer or None
        None while nbgrader runs the notebook (:func:`~attention_lab.core.explorer.unless_grading`).

    Raises
    ------
    ValueError
        If ``params``, ``config`` or an initial setting is not allowed (:class:`HeadsExplorer`).
    """
    return unless_grading("the head explorer", HeadsExplorer, model_forward, params, config, **settings)
