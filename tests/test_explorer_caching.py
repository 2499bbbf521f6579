"""Cached redraws never show stale content: after control changes, each explorer's picture equals a fresh one's.

The explorers keep static backgrounds (axes, ticks, colour bars) by layout key and reuse them when a control
moves back to a value shown before (``ExplorerFigure.cache_background``); they blit only what changes. The oracle
here is a new explorer built with the same settings, whose first picture is drawn from nothing: the two PNGs must
decode to the same pixels, and the summaries must be equal.
"""

import dataclasses
import io

import numpy as np
import pytest
from PIL import Image

from attention_lab.a01_attention import visual as a01
from attention_lab.a02_multi_head import visual as a02
from attention_lab.a03_positional import visual as a03
from attention_lab.a04_masking import visual as a04
from attention_lab.a08_modern_attention import alibi as a08_alibi
from autograder.assignments.a01_attention import reference as r01
from autograder.assignments.a02_multi_head import reference as r02
from autograder.assignments.a03_positional import reference as r03
from autograder.assignments.a04_masking import reference as r04
from autograder.assignments.a08_modern_attention import reference as r08

A03_FUNCTIONS = (r03.sinusoidal_positional_encoding, r03.dot_product_by_offset, r03.offset_rotation,
                 r03.self_attention, r03.add_positions)

# Per explorer: its class and functions, small initial settings, and changes that leave a layout key and come
# back to it (so that a kept background is reused), with the colour scale changed and restored in between.
CASES = {
    "attention": (a01.AttentionExplorer, (r01.scaled_dot_product_attention, r01.causal_mask, r01.attention_entropy),
                  dict(T=12, d_head=16),
                  [("T_slider", 20), ("colour_dropdown", "linear 0–1"), ("T_slider", 12), ("d_slider", 4),
                   ("colour_dropdown", "logarithmic"), ("causal_box", False), ("T_slider", 20), ("seed_slider", 3)]),
    "multi-head": (a02.MultiHeadExplorer, (r02.multi_head_attention, r01.attention_entropy), dict(T=10, n_heads=4),
                   [("heads_slider", 8), ("colour_dropdown", "row-normalised"), ("heads_slider", 4), ("head_slider", 3),
                    ("T_slider", 14), ("colour_dropdown", "logarithmic"), ("T_slider", 10), ("causal_box", False)]),
    "positional": (a03.PositionalExplorer, A03_FUNCTIONS, dict(T=16, d_model=8, t=3, k=2, pair=1),
                   [("T_slider", 24), ("d_slider", 12), ("T_slider", 16), ("d_slider", 8), ("k_slider", -3),
                    ("pair_slider", 2), ("seed_slider", 5)]),
    "masking": (a04.MaskingExplorer, (r04.padding_mask, r04.causal_padding_mask, r04.masked_softmax),
                dict(T=8, lengths=(8, 5, 0)),
                [("T_slider", 12), ("colour_dropdown", "linear 0–1"), ("T_slider", 8), ("dtype_buttons", "float16"),
                 ("colour_dropdown", "logarithmic"), ("causal_box", False)]),
    "ALiBi": (a08_alibi.AlibiExplorer, (r08.alibi_slopes,), dict(n_heads=4, T=12),
              [("row_slider", 5), ("T_slider", 16), ("T_slider", 12), ("heads_slider", 6), ("row_slider", 2),
               ("heads_slider", 4)]),
}


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def assert_same_as_fresh(explorer, make, functions):
    fresh = make(*functions, **dataclasses.asdict(explorer.settings), sync=True)
    assert fresh.settings == explorer.settings
    assert explorer.summary.value == fresh.summary.value
    drawn, expected = pixels(explorer.image.value), pixels(fresh.image.value)
    differing = np.argwhere((drawn != expected).any(axis=-1))
    assert differing.size == 0, f"{len(differing)} pixels differ from a fresh draw, first at (row, column) {differing[0]}"


@pytest.mark.parametrize("name", CASES)
def test_pictures_after_changes_equal_a_fresh_explorers(name):
    make, functions, initial, changes = CASES[name]
    explorer = make(*functions, **initial, sync=True)
    for step, (control, value) in enumerate(changes):
        getattr(explorer, control).value = value
        if step in (2, len(changes) - 1):  # once a background was reused, and at the end
            assert_same_as_fresh(explorer, make, functions)


def test_a_kept_background_is_reused_not_redrawn():
    make, functions, initial, _ = CASES["attention"]
    explorer = make(*functions, **initial, sync=True)
    first = explorer.figure.background
    explorer.T_slider.value = 20
    assert explorer.figure.background is not first
    explorer.T_slider.value = 12
    assert explorer.figure.background is first  # the background drawn for T = 12 at the start
    explorer.T_slider.value = 20
    explorer.figure.forget_backgrounds()  # all but T = 20's
    explorer.T_slider.value = 12
    assert explorer.figure.background is not first
