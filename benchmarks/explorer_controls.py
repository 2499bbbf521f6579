"""Every control of every explorer, timed in one process for one version of the code (a worker of explorer_latency).

``python benchmarks/explorer_controls.py CODE_ROOT EXPLORER REPEATS`` imports ``attention_lab`` and the reference
solutions from ``CODE_ROOT`` (this checkout, or an exported older commit: the baseline), builds the explorer named
``EXPLORER`` (:data:`EXPLORERS`) at its largest T up to 512 with the reference functions (synchronous redraws, as
the tests drive them), and prints one JSON object: per control, the median time in ms from setting the control's
value to the new PNG being in the ``ipywidgets.Image``, in wall-clock time and in this process's CPU time (which
other jobs on a shared machine disturb less; the redraw runs on one thread). Each timed change moves the control back from its
neighbouring value (set untimed just before). "first" times it after the figure forgot its kept backgrounds
(``ExplorerFigure.forget_backgrounds``, when the code has it; assignment 6: its per-T caches): a value not shown
before, as each step of a slider dragged to new values is. "again" times it with them: back to a value shown lately.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "agg")


def explorers():
    """Name → (function building the explorer, T it is built at)."""
    from attention_lab.a01_attention import visual as v1
    from attention_lab.a02_multi_head import visual as v2
    from attention_lab.a03_positional import visual as v3
    from attention_lab.a04_masking import visual as v4
    from attention_lab.a05_kv_cache import visual as v5
    from attention_lab.a06_gradients import visual as v6
    from attention_lab.a07_tiled_attention import visual as v7
    from attention_lab.a08_modern_attention import alibi as v8a
    from attention_lab.a08_modern_attention import visual as v8
    from autograder.assignments.a01_attention import reference as r1
    from autograder.assignments.a02_multi_head import reference as r2
    from autograder.assignments.a03_positional import reference as r3
    from autograder.assignments.a04_masking import reference as r4
    from autograder.assignments.a05_kv_cache import reference as r5
    from autograder.assignments.a06_gradients import reference as r6
    from autograder.assignments.a07_tiled_attention import reference as r7
    from autograder.assignments.a08_modern_attention import reference as r8

    return {
        "A1 attention": (lambda: v1.AttentionExplorer(r1.scaled_dot_product_attention, r1.causal_mask,
                                                      r1.attention_entropy, T=512, d_head=64, sync=True), 512),
        "A2 multi-head": (lambda: v2.MultiHeadExplorer(r2.multi_head_attention, r1.attention_entropy, T=v2.T_MAX,
                                                       n_heads=4, sync=True), v2.T_MAX),
        "A3 positional": (lambda: v3.PositionalExplorer(r3.sinusoidal_positional_encoding, r3.dot_product_by_offset,
                                                        r3.offset_rotation, r3.self_attention, r3.add_positions,
                                                        T=512, d_model=32, t=8, k=5, pair=2, sync=True), 512),
        "A4 masking": (lambda: v4.MaskingExplorer(r4.padding_mask, r4.causal_padding_mask, r4.masked_softmax,
                                                  T=v4.T_MAX, lengths=(v4.T_MAX, 5, 0), sync=True), v4.T_MAX),
        "A5 KV-cache cost": (lambda: v5.CacheCostExplorer(r5.attention_cost_per_token, T=512, d_model=512,
                                                          d_head=64, sync=True), 512),
        "A6 gradients": (lambda: v6.GradientExplorer(r6.softmax_jacobian, r6.softmax_backward, T=max(v6.T_OPTIONS),
                                                     d_head=16, sync=True), max(v6.T_OPTIONS)),
        "A7 tiles": (lambda: v7.TileExplorer(r7.tile_schedule, T_q=512, T_k=512, block_q=16, block_k=12, causal=True,
                                             sync=True), 512),
        "A8 RoPE": (lambda: v8.RopeExplorer(r8.apply_rope, T=v8.T_MAX, d_head=16, sync=True), v8.T_MAX),
        "A8 KV-cache memory": (lambda: v8.CacheMemoryExplorer(r8.kv_cache_bytes, preset="Llama 2 70B", sync=True),
                               None),
        "A8 ALiBi": (lambda: v8a.AlibiExplorer(r8.alibi_slopes, n_heads=8, T=v8a.T_MAX, sync=True), v8a.T_MAX),
    }


def controls(explorer):
    """The explorer's controls in the order shown (rows of controls, and controls placed alone)."""
    import ipywidgets as widgets

    for child in explorer.widget.children:
        if isinstance(child, widgets.HBox):
            yield from child.children
        elif isinstance(child, (widgets.ValueWidget, widgets.Button)) and not isinstance(
                child, (widgets.Image, widgets.HTML)):
            yield child


def neighbour(control):
    """A value next to the control's current one (None for a button)."""
    import ipywidgets as widgets

    if isinstance(control, widgets.Button):
        return None
    if isinstance(control, widgets.Checkbox):
        return not control.value
    if getattr(control, "options", None):
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        i = values.index(control.value)
        return values[i - 1] if i > 0 else values[i + 1]
    step = control.step or 1
    return control.value - step if control.value - step >= control.min else control.value + step


def forget(explorer, control) -> None:
    """Drop what the explorer keeps from earlier views: backgrounds; assignment 6, for its T, the per-T curves."""
    figure = explorer.figure
    if hasattr(figure, "forget_backgrounds"):
        figure.forget_backgrounds()
    if hasattr(explorer, "_curves_by_T") and control is explorer.T_slider:  # assignment 6 keeps them per T
        from attention_lab.a06_gradients import curves

        curves._rows.cache_clear()
        explorer._curves_by_T.clear()
        figure._backgrounds.clear()


def time_controls(explorer, repeats: int) -> dict[str, dict[str, float]]:
    """Per control: median wall-clock and CPU time (ms) of a change, "first" and "again" (see the module's text)."""
    results = {}
    for control in controls(explorer):
        name = control.description or type(control).__name__
        times = {"first": [], "again": [], "first_cpu": [], "again_cpu": []}
        for kind in ("first", "again"):
            for _ in range(repeats):
                other = neighbour(control)
                if other is not None:
                    value = control.value
                    control.value = other
                if kind == "first":
                    forget(explorer, control)
                start, cpu = time.perf_counter(), time.process_time()
                if other is None:  # a button: "next seed", always a new one
                    control.click()
                else:
                    control.value = value
                times[kind].append(time.perf_counter() - start)
                times[kind + "_cpu"].append(time.process_time() - cpu)
        results[name] = {kind: 1000 * statistics.median(values) for kind, values in times.items()}
    return results


def main() -> int:
    root, name, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, root)
    make, T = explorers()[name]
    explorer = make()
    time_controls(explorer, 1)  # warm up: fonts, caches of matplotlib
    print(json.dumps({"T": T, "controls": time_controls(explorer, repeats)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
