"""How much memory attention holds at once, measured: full attention against a learner's tiled attention.

:func:`traced_peak_bytes` measures the most memory a call holds at once with :mod:`tracemalloc`,
to which NumPy reports its array buffers; :func:`memory_growth` does it for full attention
(:func:`full_attention`, which holds the (T, T) scores, exponentials and weights) and for a tiled
attention function as T grows; :func:`plot_memory` prints the table and draws it on log-log axes
next to one T × T float64 matrix (8 T² bytes) and the grading sandbox's 2 GiB. The grader's
reference (``autograder/assignments/a07_tiled_attention/reference.py``) measures with the same
functions.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Callable, Sequence

import numpy as np

#: The grading sandbox's address-space limit, bytes (``c.SandboxedKernelManager.memory_limit`` in
#: nbgrader_config.py; a test checks that the two agree).
SANDBOX_MEMORY_LIMIT = 2 * 2**30
#: The graded memory case's T (step 4): its T × T float64 matrix needs 3.2 GB.
GRADED_T = 20_000
#: Full attention is measured up to this T (its four 4096 × 4096 arrays are 512 MiB); beyond, 4 · 8 T².
FULL_MEASURED_UP_TO = 4096
T_VALUES = (256, 512, 1024, 2048, 4096)
#: Time limit of the whole measurement on a learner's function (an endless loop becomes a message).
CALL_SECONDS = 60.0


def traced_peak_bytes(function: Callable, *args, **kwargs):
    """Call ``function(*args, **kwargs)`` and measure the most memory it held at once, in bytes.

    The peak of :mod:`tracemalloc`'s traced memory during the call minus what was traced before it:
    the temporaries and the result, not the inputs. Deterministic for a given NumPy (the same
    allocations every run).

    Parameters
    ----------
    function : callable
    *args, **kwargs
        Passed to ``function``.

    Returns
    -------
    result : object
        What ``function`` returned.
    peak : int
        Peak traced bytes above the level at the call, ≥ 0.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = function(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, max(peak - before, 0)


def full_attention(Q, K, V, causal=True):
    """softmax(mask(Q Kᵀ / √d_k)) V the usual way, holding the (T_q, T_k) scores, exponentials and weights.

    The baseline of the memory plot (Vaswani et al. 2017, eq. 1; the causal mask bottom-right, as
    assignment 5). Not one of the assignment's functions.

    Parameters
    ----------
    Q : numpy.ndarray, shape (T_q, d_k)
    K : numpy.ndarray, shape (T_k, d_k)
    V : numpy.ndarray, shape (T_k, d_v)
    causal : bool

    Returns
    -------
    numpy.ndarray, shape (T_q, d_v)
    """
    scores = Q @ K.T / math.sqrt(Q.shape[-1])
    if causal:
        T_q, T_k = scores.shape
        scores = np.where(np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + (T_k - T_q), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V


def memory_growth(tiled_attention: Callable, T_values: Sequence[int] = T_VALUES, d_head: int = 8,
                  block: int = 256, causal: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """Measured peak memory of full attention and of ``tiled_attention`` as T grows.

    For each T: Q, K, V of shape (T, d_head) from a fixed seed; the peak of
    :func:`traced_peak_bytes` for :func:`full_attention` and for
    ``tiled_attention(Q, K, V, block, block, causal)``.

    Parameters
    ----------
    tiled_attention : callable
        ``tiled_attention(Q, K, V, block_q, block_k, causal)`` → (T, d_head).
    T_values : sequence of int
        Sequence lengths, each ≥ 1.
    d_head, block : int
        Head size and tile size (both sides), ≥ 1.
    causal : bool
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    dict of str to numpy.ndarray of int64, each of shape (len(T_values),)
        ``"T"``, ``"full"`` (peak bytes of full attention), ``"tiled"`` (peak bytes of
        ``tiled_attention``), ``"score_matrix"`` (8 T², one float64 T × T matrix).

    Raises
    ------
    ValueError
        If a size is not an integer ≥ 1 or ``causal`` is not a boolean.
    """
    for name, value in (("d_head", d_head), ("block", block), *((f"T_values[{i}]", T) for i, T in enumerate(T_values))):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; received {value!r}")
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal must be True or False; received {causal!r}")
    rng = np.random.default_rng(seed)
    rows = {"T": [], "full": [], "tiled": [], "score_matrix": []}
    for T in T_values:
        Q, K, V = (rng.normal(size=(int(T), d_head)) for _ in range(3))
        _, full = traced_peak_bytes(full_attention, Q, K, V, causal)
        _, tiled = traced_peak_bytes(tiled_attention, Q, K, V, block, block, causal)
        for key, value in (("T", T), ("full", full), ("tiled", tiled), ("score_matrix", 8 * int(T) ** 2)):
            rows[key].append(value)
    return {key: np.array(values, dtype=np.int64) for key, values in rows.items()}


def slope(T: np.ndarray, peak: np.ndarray) -> float:
    """The log-log slope of ``peak`` against ``T`` between the last two points (2: quadratic, ≈ 1 or less: linear)."""
    return float(np.log(peak[-1] / peak[-2]) / np.log(T[-1] / T[-2]))


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def memory_description(growth: dict, block: int) -> str:
    """The memory plot in words (its text alternative): what each curve measured and how it grows.

    Parameters
    ----------
    growth : dict
        :func:`memory_growth`'s table.
    block : int
        The tile size the tiled curve was measured with.

    Returns
    -------
    str
    """
    T, full, tiled = growth["T"], growth["full"], growth["tiled"]
    return (f"Log-log plot of the largest memory held at once against T, from T = {T[0]} to {T[-1]} (causal "
            f"attention). Full attention: {_mib(full[0])} to {_mib(full[-1])}, slope {slope(T, full):.2f} over the "
            f"last doubling, extrapolated as T² (dashed) to the graded T = {GRADED_T:,}. Your tiled_attention with "
            f"tiles of {block} × {block}: {_mib(tiled[0])} to {_mib(tiled[-1])}, slope {slope(T, tiled):.2f}. A dotted "
            "line shows one T × T float64 matrix (8 T² bytes); it crosses the horizontal line of the grading "
            f"sandbox's 2 GiB before the vertical line at the graded T = {GRADED_T:,}.")


def plot_memory(tiled_attention: Callable, T_values: Sequence[int] = T_VALUES, d_head: int = 8, block: int = 256):
    """Print the measured peaks of full and tiled attention as T grows, and plot them (log-log).

    The plot shows full attention (measured, then extrapolated as 4 · 8 T² up to the graded
    T = 20 000, dashed), ``tiled_attention`` (measured), one T × T float64 matrix (8 T²), the sandbox's
    2 GiB and a marker at T = 20 000.

    Parameters
    ----------
    tiled_attention : callable
        The learner's ``tiled_attention(Q, K, V, block_q, block_k, causal)``.
    T_values, d_head, block
        As for :func:`memory_growth`.

    Returns
    -------
    dict or None
        :func:`memory_growth`'s table, or None when ``tiled_attention`` failed (the message is printed) or
        nbgrader is running the notebook (full attention at T = 4096 holds 512 MiB: not while grading).
    """
    import os

    if os.environ.get("NBGRADER_EXECUTION"):
        print("(the memory plot is not drawn while grading)")
        return None

    # imported here, after the check above: a graded kernel skips this plot's imports with the plot
    from attention_lab.core.calls import call_learner
    from attention_lab.core.plots import CURVE_COLOURS, REFERENCE_COLOUR, show_figure, subplots

    try:
        growth = call_learner(memory_growth, tiled_attention, T_values, d_head, block, seconds=CALL_SECONDS)
    except Exception as error:  # noqa: BLE001 — the learner's function failed: one line, no traceback
        print(f"⚠ tiled_attention failed while being measured: {type(error).__name__}: {error}")
        return None
    print(f"{'T':>6}  {'one T×T float64':>16}  {'full attention':>15}  {'tiled attention':>16}")
    for T, matrix, full, tiled in zip(growth["T"], growth["score_matrix"], growth["full"], growth["tiled"]):
        print(f"{T:>6}  {_mib(matrix):>16}  {_mib(full):>15}  {_mib(tiled):>16}")
    print(f"log-log slope over the last doubling: full attention {slope(growth['T'], growth['full']):.2f}, "
          f"tiled attention {slope(growth['T'], growth['tiled']):.2f}")
    figure, ax = subplots(figsize=(7.0, 4.2), layout=None)  # outside pyplot: shown only with its text
    T = growth["T"].astype(float)
    beyond = np.geomspace(T[-1], GRADED_T, 8)
    full_colour, tiled_colour, matrix_colour = CURVE_COLOURS[:3]  # apart in lightness, also for colour-blind readers
    ax.plot(T, growth["full"], "o-", color=full_colour, label="full attention (measured)")
    ax.plot(beyond, growth["full"][-1] * (beyond / T[-1]) ** 2, "--", color=full_colour,
            label="full attention, extrapolated (∝ T²)")
    ax.plot(T, growth["tiled"], "s-", color=tiled_colour, label=f"your tiled_attention, tiles {block} × {block}")
    everywhere = np.geomspace(T[0], GRADED_T, 20)
    ax.plot(everywhere, 8 * everywhere ** 2, ":", color=matrix_colour, label="one T × T float64 matrix, 8 T² bytes")
    ax.axhline(SANDBOX_MEMORY_LIMIT, color=REFERENCE_COLOUR, lw=1, label="the grading sandbox's 2 GiB")
    ax.axvline(GRADED_T, color=REFERENCE_COLOUR, lw=0.8, ls="-.", label=f"the graded T = {GRADED_T:,}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (query and key positions)")
    ax.set_ylabel("largest memory held at once (bytes)")
    ax.set_title(f"causal attention, d_head = {d_head}: peak memory against T", fontsize=10)
    ax.legend(fontsize="x-small", loc="upper left")
    show_figure(figure, memory_description(growth, block))
    return growth
