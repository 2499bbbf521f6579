"""Issue 12 §3: the notebooks' texts say what the code computes.

Each test recomputes a value a text claims (with the course's reference, or with NumPy alone) and checks that the
text states that value — so a test fails when the text goes back to the old slip, and also when the code it
describes changes under it. Texts are read from the source notebooks (release/ is generated from them and
checked by test_release), the self-study notebooks, the README and the explorers' docstrings and labels.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from matplotlib.lines import Line2D

from attention_lab.a01_attention import checks as checks_1
from attention_lab.a02_multi_head import visual as multi_head_visual
from attention_lab.a03_positional import visual as positional_visual
from autograder.assignments.a01_attention import reference as ref_1
from autograder.assignments.a02_multi_head import reference as ref_2
from autograder.assignments.a03_positional import reference as ref_3
from autograder.assignments.a03_positional import spec as spec_3
from autograder.assignments.a03_positional.bank import MISTAKES as MISTAKES_3
from autograder.assignments.a05_kv_cache import reference as ref_5
from autograder.nbgrader.notebook_cells import read
from autograder.assignments import all_assignments
from conftest import REPO

#: assignment number → its source notebook, in course order (from the specs)
NOTEBOOKS = {number: REPO / "source" / name / assignment.notebook
             for number, (name, assignment) in enumerate(all_assignments().items(), start=1)}
COUNTS = "zero one two three four five six seven eight nine ten".split()
START_PAGE = REPO / "notebooks" / "00_start_here.ipynb"


def words(text: str) -> str:
    """The text with every run of whitespace made one space (notebook lines break anywhere)."""
    return " ".join(text.split())


def markdown(path) -> str:
    return words("\n\n".join(c.source for c in read(path).cells if c.cell_type == "markdown"))


def cell_starting(path, start: str) -> str:
    return words(next(c.source for c in read(path).cells if c.cell_type == "markdown" and start in c.source))


# ---- assignment 1: entropy framing, footnote 4, fact 1 --------------------------------------------------------

def fact_3_draw(d_head: int, T: int = 32):
    """The inputs check_scaling_prevents_saturation draws (seed 3, q, k ~ N(0, I), two value columns)."""
    rng = np.random.default_rng(3)
    return rng.normal(size=(T, d_head)), rng.normal(size=(T, d_head)), rng.normal(size=(T, 2))


def mean_entropy(Q, K, V) -> float:
    return float(np.mean(ref_1.attention_entropy(ref_1.scaled_dot_product_attention(Q, K, V)[1])))


def test_fact_3_states_the_printed_entropies_and_that_the_d_k_ceiling_ignores_the_scores(capsys):
    scaled, unscaled = checks_1.check_scaling_prevents_saturation(ref_1.scaled_dot_product_attention,
                                                                  ref_1.attention_entropy, d_head=256, T=32)
    printed = capsys.readouterr().out
    ceiling = math.log(32)
    Q, K, V = fact_3_draw(256)
    by_d_k = mean_entropy(Q / math.sqrt(256), K, V)     # scores ÷ d_k: attention's own ÷√d_k after Q ÷ √d_k
    text = cell_starting(NOTEBOOKS[1], "**Fact 3")
    assert f"scaled {scaled:.2f} nats, unscaled {unscaled:.2f} nats" in printed
    assert f"{scaled:.2f} nats, {ceiling - scaled:.2f} nats below the uniform ceiling" in text   # 3.01, 0.45
    assert f"({100 * scaled / ceiling:.0f} % of it)" in text                                     # 87 %
    assert f"entropy is {unscaled:.2f} nats" in text                                             # 0.21
    assert f"Divided by $d_k$ instead, the entropy is {by_d_k:.2f} nats, almost exactly the ceiling" in text
    assert ceiling - by_d_k < checks_1.SCALED_GAP[0] <= ceiling - scaled  # "÷d_k fails it", ÷√d_k passes
    assert "(÷$d_k$ fails it)" in text
    assert "the attention ignores the scores" in text and "A higher entropy is not a better one" in text
    assert "close to the" not in text and "about half a nat" not in text


def test_fact_3_says_what_sqrt_d_k_keeps_constant_and_the_values_bear_it_out():
    std = [float(np.std(ref_1.attention_scores(*fact_3_draw(d)[:2]))) for d in (16, 64, 256, 512)]
    entropies = [mean_entropy(*fact_3_draw(d)) for d in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]
    assert all(0.85 < s < 1.15 for s in std), std                     # score variance ≈ 1 whatever d_k is
    assert 2.9 <= min(entropies) and max(entropies) <= 3.2, entropies
    text = cell_starting(NOTEBOOKS[1], "**Fact 3")
    assert "the scores have variance 1 whatever $d_k$ is, so the entropy hardly depends on $d_k$" in text
    assert "stays between 2.9 and 3.2 nats for every $d_k$ from 1 to 512" in text
    step_3 = cell_starting(NOTEBOOKS[1], "## Step 3")
    assert "that is what the scaling keeps constant" in step_3 and "a uniform row ignores the scores" in step_3
    explorer = markdown(REPO / "notebooks" / "01_attention_explorer.ipynb")
    assert "keeps the scores' variance at 1, so the entropy hardly depends on `d_head`" in explorer
    assert "which means the attention ignores the scores — a higher entropy is not a better one" in explorer


def test_step_3_quotes_the_gradient_remark_from_the_main_text_and_gives_footnote_4_the_variance():
    step_3 = cell_starting(NOTEBOOKS[1], "## Step 3")
    # Vaswani et al. 2017, §3.2.1: "pushing the softmax function into regions where it has extremely small
    # gradients⁴"; footnote 4: "assume that the components of q and k are independent random variables with
    # mean 0 and variance 1. Then their dot product … has mean 0 and variance d_k."
    assert ('"the softmax function into regions where it has extremely small gradients" (Vaswani et al. 2017, '
            '§3.2.1, main text; footnote 4 gives the variance argument above)') in step_3
    assert "independent with mean 0 and variance 1 (the assumption of the paper's footnote 4)" in step_3
    assert "to use (Vaswani et al. 2017, footnote 4)" not in step_3


def test_fact_1_text_and_check_name_the_convex_hull_and_test_each_column_between_its_min_and_max(capsys):
    text = cell_starting(NOTEBOOKS[1], "**Fact 1")
    assert "the output row lies in the **convex hull** of the rows of $V$" in text
    assert "each of its columns lies between that column's smallest and largest value in $V$: that is what the " \
           "check tests" in text
    assert "range spanned" not in text
    checks_1.check_rows_are_weighted_averages(ref_1.scaled_dot_product_attention)
    assert "convex hull of the rows of V (each column between its smallest and largest value in V)" in \
        capsys.readouterr().out

    # the property the text states, on the check's own draw: every output column within its column of V
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(5, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 3))
    out, w = ref_1.scaled_dot_product_attention(Q, K, V)
    assert np.all(out >= V.min(axis=0) - 1e-12) and np.all(out <= V.max(axis=0) + 1e-12)


# ---- assignment 2: the reshape leak, concat-then-W_o, the multi-head caveat --------------------------------

def causal_multi_head(x, W, n_heads, split, merge):
    T = x.shape[0]
    Q, K, V = (split(x @ w) for w in W[:3])
    out, _ = ref_1.scaled_dot_product_attention(Q, K, V, mask=np.tril(np.ones((T, T), dtype=bool)))
    return merge(out) @ W[3]


def earlier_outputs_changed_by(token, x, W, n_heads, split, merge):
    before = causal_multi_head(x, W, n_heads, split, merge)
    changed = x.copy()
    changed[token] += 1.0
    after = causal_multi_head(changed, W, n_heads, split, merge)
    return [i for i in range(token) if not np.allclose(before[i], after[i], rtol=1e-12, atol=1e-12)]


def test_the_wrong_split_leaks_future_tokens_into_earlier_positions_as_the_text_says():
    T, d_model, n_heads = 6, 8, 2
    rng = np.random.default_rng(0)
    x, W = rng.normal(size=(T, d_model)), [rng.normal(size=(d_model, d_model)) for _ in range(4)]
    wrong_split = lambda X: X.reshape(n_heads, T, d_model // n_heads)  # noqa: E731
    right_split = lambda X: ref_2.split_heads(X, n_heads)  # noqa: E731
    assert earlier_outputs_changed_by(3, x, W, n_heads, wrong_split, ref_2.merge_heads) == [0, 1, 2]
    assert earlier_outputs_changed_by(3, x, W, n_heads, right_split, ref_2.merge_heads) == []
    text = cell_starting(NOTEBOOKS[2], "## Step 1")
    assert ("With this wrong split and a correct merge, in a causal layer with $T = 6$ tokens, `d_model = 8` and "
            "2 heads, changing token 3 changes the outputs at positions 0, 1 and 2.") in text
    assert "easy tasks" not in text and "survives in published code" not in text


def test_concat_then_W_o_equals_the_sum_over_heads_of_each_head_times_its_rows_of_W_o():
    n_heads, T, d_head = 4, 5, 3
    rng = np.random.default_rng(1)
    H, W_o = rng.normal(size=(n_heads, T, d_head)), rng.normal(size=(n_heads * d_head, n_heads * d_head))
    summed = sum(H[h] @ W_o[h * d_head:(h + 1) * d_head, :] for h in range(n_heads))
    np.testing.assert_allclose(ref_2.merge_heads(H) @ W_o, summed, rtol=1e-12, atol=1e-12)
    text = cell_starting(NOTEBOOKS[2], "## Step 3")
    assert (r"$\mathrm{Concat}(\mathrm{head}_0, \ldots)\,W_o = \sum_h \mathrm{head}_h\, "
            r"W_o[h\,d_\text{head} : (h+1)\,d_\text{head},\, :]$") in text
    assert "the heads' results are summed" in text


def test_heads_differ_in_where_they_look_is_said_of_random_weights_only():
    text = markdown(REPO / "notebooks" / "02_multi_head_explorer.ipynb")
    assert "with these **random** weights the heads differ in *where* they look, not in how sharp they are" in text
    assert "That holds for random projections only" in text
    assert "whatever `n_heads` is: heads differ in *where* they look" not in text
    assert "with the random weights used here the heads differ by what they look at" in words(
        multi_head_visual.__doc__)


# ---- assignment 3: random table, ahead = behind, not monotone, the last pair's wavelength ---------------------

def test_the_dot_product_cannot_tell_ahead_from_behind():
    pe = ref_3.sinusoidal_positional_encoding(120, 32)
    t = 60
    ahead = np.array([pe[t] @ pe[t + k] for k in range(1, 60)])
    behind = np.array([pe[t] @ pe[t - k] for k in range(1, 60)])
    np.testing.assert_allclose(ahead, behind, rtol=1e-12, atol=1e-12)
    text = cell_starting(NOTEBOOKS[3], "## Step 2")
    assert r"$$PE(t)\cdot PE(t+k) = PE(t)\cdot PE(t-k):$$" in text
    assert "**not which one comes first** — ahead and behind look the same" in text
    explorer = markdown(REPO / "notebooks" / "03_positional_encoding_explorer.ipynb")
    assert "it is the same for $-k$: the dot product cannot tell ahead from behind" in explorer


def test_the_sum_of_cosines_falls_but_not_monotonically_as_the_text_says():
    notebook = read(NOTEBOOKS[3])
    plot_cell = next(c.source for c in notebook.cells if c.cell_type == "code" and "plot_dot_products" in c.source)
    assert "sinusoidal_positional_encoding(100, 32)" in plot_cell   # the text's numbers are the plot's
    dots = ref_3.dot_product_by_offset(ref_3.sinusoidal_positional_encoding(100, 32), 0)
    rises = np.flatnonzero(np.diff(dots) > 0) + 1                   # offsets k where dots[k] > dots[k − 1]
    assert dots[0] == 16 and round(float(dots[4]), 1) == 11.7 and rises[:2].tolist() == [5, 6]
    assert np.all(np.diff(dots[:5]) < 0)
    text = cell_starting(NOTEBOOKS[3], "## Step 2")
    assert ("**not monotonically**: in the plot below ($d_\\text{model} = 32$) it drops from 16 to 11.7 at $k = 4$, "
            "rises again at $k = 5$ and $6$") in text
    assert "drifts down" not in text


def test_the_last_pairs_wavelength_is_10000_times_2_pi_only_for_large_d_model():
    def last_wavelength_in_turns(d_model):      # 1 / ω of the last pair: its wavelength in units of 2π positions
        return 1.0 / ref_3.frequencies(d_model)[-1]

    def from_table(d_model):                    # the same, read off the table: column d_model − 2 is sin(t·ω)
        return 1.0 / math.asin(ref_3.sinusoidal_positional_encoding(2, d_model)[1, d_model - 2])

    for d_model in (4, 512):
        assert last_wavelength_in_turns(d_model) == pytest.approx(10000 ** ((d_model - 2) / d_model), rel=1e-12)
        assert from_table(d_model) == pytest.approx(last_wavelength_in_turns(d_model), rel=1e-9)
    assert round(last_wavelength_in_turns(512)) == 9647 and round(last_wavelength_in_turns(4)) == 100
    text = cell_starting(NOTEBOOKS[3], "## Step 1")
    assert r"up to a wavelength of $10000^{(d_\text{model}-2)/d_\text{model}} \cdot 2\pi$ positions" in text
    assert r"about $9647 \cdot 2\pi$ for $d_\text{model} = 512$); for $d_\text{model} = 4$ it is $100 \cdot 2\pi$" \
        in text
    assert "almost $10000 \\cdot 2\\pi$ positions for the last pair" not in text
    hint = MISTAKES_3["exponent_pair_index"].hint
    assert "100 times for d_model = 4, almost 10000 times only for large d_model" in hint


def test_the_random_table_is_called_a_random_table():
    labels = [line.get_label() for line in positional_visual.PositionalFigure().figure.findobj(Line2D)]
    assert "random table" in labels and "learned (random)" not in labels
    descriptions = [case.description for case in spec_3.ASSIGNMENT.step("test_dot_product_by_offset").cases()]
    assert any(d.startswith("a random table") for d in descriptions)
    assert not any("learned (random)" in d for d in descriptions)
    test_cell = next(c.source for c in read(NOTEBOOKS[3]).cells if "Autograder tests for step 2" in c.source)
    assert "a sinusoidal table and random tables" in test_cell


# ---- assignment 4: bfloat16 ----------------------------------------------------------------------------------

def to_bfloat16(value: float) -> float:
    """Round a float32 to bfloat16 (its top 16 bits, round to nearest, ties to even), back as a float."""
    bits = int(np.array([value], dtype=np.float32).view(np.uint32)[0])
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def test_bfloat16_keeps_minus_1e9_finite_and_numpy_has_none():
    with np.errstate(over="ignore"):
        assert np.float16(-1e9) == -np.inf                   # float16: −1e9 does not fit
    assert to_bfloat16(-1e9) == -998_244_352.0                # bfloat16: finite, 8 significant bits
    largest = float(np.array([0x7F7F0000], dtype=np.uint32).view(np.float32)[0])  # bfloat16's largest finite
    assert to_bfloat16(largest) == largest == (2 - 2 ** -7) * 2.0 ** 127 and round(largest / 1e38, 1) == 3.4
    with pytest.raises(TypeError):
        np.dtype("bfloat16")
    text = cell_starting(NOTEBOOKS[4], "## Interlude")
    assert "**bfloat16**" in text and "keeps float32's 8 exponent bits and so float32's range" in text
    assert r"up to about $3.4 \cdot 10^{38}$: there $-10^9$ stays finite (it rounds to $-998\,244\,352$" in text
    assert "NumPy has no bfloat16, so this assignment shows float16" in text
    assert "Frameworks also compute the softmax itself in float32" in text
    explorer = markdown(REPO / "notebooks" / "04_masks_and_stability_explorer.ipynb")
    assert "NumPy has no bfloat16" in explorer and "frameworks compute the softmax in float32" in explorer


# ---- assignment 5: deeper layers, the per-token terms, the cache's memory ---------------------------------------

def test_keys_of_a_deeper_layer_depend_on_earlier_tokens_but_not_on_later_ones():
    T, d = 5, 4
    rng = np.random.default_rng(5)
    x = rng.normal(size=(T, d))
    W1, W2 = ([rng.normal(size=(d, d)) for _ in range(3)] for _ in range(2))
    mask = np.tril(np.ones((T, T), dtype=bool))

    def second_layer_keys(tokens):
        hidden, _ = ref_1.scaled_dot_product_attention(*(tokens @ w for w in W1), mask=mask[:len(tokens), :len(tokens)])
        return hidden @ W2[1]

    keys = second_layer_keys(x)
    np.testing.assert_array_equal(second_layer_keys(x[:3]), keys[:3])   # appending tokens changes no earlier key
    changed = x.copy()
    changed[0] += 1.0
    assert not np.allclose(second_layer_keys(changed)[2], keys[2])      # key 2 depends on token 0, not only token 2
    text = markdown(NOTEBOOKS[5])
    assert "in every layer, because $x_j$ depends only on tokens $0 \\ldots j$" in text
    assert "The key and value of position $j < t$ depend only on tokens $0 \\ldots j$" in text
    assert "depend only on their own tokens" not in text


def test_per_token_terms_change_the_ratio_of_the_totals_but_not_the_ratio_per_token():
    d_model, d_head, T = 64, 16, 200
    cost = ref_5.attention_cost_per_token
    for t in (1, 7, 200):
        assert cost(t, d_model, d_head, cached=False) == t * cost(t, d_model, d_head, cached=True)

    def total_ratio(c):
        cached = sum(cost(t, d_model, d_head, cached=True) + c for t in range(1, T + 1))
        recomputed = sum(cost(t, d_model, d_head, cached=False) + t * c for t in range(1, T + 1))
        return recomputed / cached

    ratios = [total_ratio(c) for c in (0, d_model ** 2, 9 * d_model ** 2, 1000 * d_model ** 2)]
    assert all((T + 1) / 2 < r < (2 * T + 1) / 3 for r in ratios)
    assert all(a > b for a, b in zip(ratios, ratios[1:]))           # the larger c, the closer to (T + 1) / 2
    assert ratios[0] != pytest.approx(ratios[1], rel=1e-3)           # W_o's d_model² alone changes it
    text = cell_starting(NOTEBOOKS[5], "## Step 4")
    assert "recomputing costs exactly $t$ times the cached cost of token $t$" in text
    assert ("they **do change** the uncached / cached ratio of the totals over all $T$ tokens: it lies between "
            "$(T+1)/2$ and $(2T+1)/3$, and the larger $c$, the closer it moves to $(T+1)/2$ (the ratio for one "
            "token stays $t$)") in text
    assert "each multiplies both counts, so the ratio between them is what this model predicts" not in text


@pytest.mark.parametrize("model, layers, heads, d_model, tokens, per_token, in_all", [
    ("GPT-2 small", 12, 12, 768, 1024, "36 KiB", "36 MiB"),
    ("Llama 2 7B", 32, 32, 4096, 4096, "512 KiB", "2 GiB"),
])
def test_the_caches_memory_per_token_is_2_layers_heads_d_head_bytes(model, layers, heads, d_model, tokens,
                                                                   per_token, in_all):
    d_head, float16_bytes = d_model // heads, 2
    per_token_bytes = 2 * layers * heads * d_head * float16_bytes

    def readable(n):
        for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
            if n >= size:
                return f"{n / size:g} {unit}"
        return f"{n} B"

    assert (readable(per_token_bytes), readable(per_token_bytes * tokens)) == (per_token, in_all)
    text = cell_starting(NOTEBOOKS[5], "## Step 4")
    assert (r"$$2 \cdot n_\text{layers} \cdot n_\text{heads} \cdot d_\text{head} \cdot (\text{bytes per number}).$$"
            in text)
    assert f"{layers} layers, {heads} heads, $d_\\text{{head}} = {d_head}$" in text
    assert f"{per_token} per token, {in_all} for {tokens} tokens" in text


# ---- the start page and the README: prerequisites, times that add up ------------------------------------------

def hours(span: str) -> tuple[float, float]:
    """'1.5–2 h' → (1.5, 2.0); '15 min' → (0.25, 0.25); 'about 60–75 minutes' → (1.0, 1.25)."""
    match = re.fullmatch(r"(?:about )?([\d.]+)(?:–([\d.]+))? ?(h|hours|min|minutes)", span.strip())
    assert match, span
    low, high = float(match[1]), float(match[2] or match[1])
    per = 60.0 if match[3].startswith("min") else 1.0
    return low / per, high / per


def start_page_rows() -> list[tuple[str, tuple[float, float]]]:
    table = next(c.source for c in read(START_PAGE).cells if "| what | where | time |" in c.source)
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    return [(cells[1].strip(), hours(cells[-2])) for cells in rows[1:]]


def test_the_time_estimates_add_up_to_what_the_start_page_and_the_readme_say():
    rows = start_page_rows()
    assignments = [span for number, span in rows if number.isdigit()]
    explorers = [span for number, span in rows if not number.isdigit()]
    assert len(assignments) == len(explorers) == len(NOTEBOOKS)
    total = (sum(low for _, (low, _) in rows), sum(high for _, (_, high) in rows))
    in_assignments = (sum(low for low, _ in assignments), sum(high for _, high in assignments))
    in_explorers = sum(low for low, _ in explorers)
    page = markdown(START_PAGE)
    assert (f"**In all: about {total[0]:g}–{total[1]:g} hours** — {in_assignments[0]:g}–{in_assignments[1]:g} h for "
            f"the {COUNTS[len(assignments)]} assignments and {in_explorers:g} h for the {COUNTS[len(explorers)]} explorers") in page
    readme = words((REPO / "README.md").read_text(encoding="utf-8"))
    assert f"(about {total[0]:g}–{total[1]:g} hours in all)" in readme
    assert "6–7 hours" not in readme


@pytest.mark.parametrize("number", sorted(NOTEBOOKS))
def test_each_assignment_states_the_time_the_start_page_gives_it(number):
    stated = re.search(r"\*\*Time:\*\* (about [\d.–]+ (?:minutes|hours))", markdown(NOTEBOOKS[number]))
    assert stated, f"assignment {number} states no time"
    assert hours(stated[1]) == dict(start_page_rows())[str(number)]


def test_the_start_page_names_the_mathematics_the_course_uses():
    page = markdown(START_PAGE)
    for prerequisite, where in (("the **variance of a sum** of independent random variables", "assignment 1, step 3"),
                                ("**logarithms and entropy**", "assignment 1, step 7"),
                                ("**permutation matrices**", "assignment 3")):
        assert prerequisite in page and where in page
    assert "variance of a sum" in markdown(NOTEBOOKS[1]) and "permutation matrices" in markdown(NOTEBOOKS[3])
