"""Assignment 9's head explorer, driven headlessly, on the committed weights.

The maps equal the reference's attention weights (read back from the caches of any model_forward of the learner's
API); the pattern scores, entropies and profiles equal the grader's analysis; the ablation's accuracies equal an
independent count with the grader's head mask; the descriptions say what findings.py's sentences say, with its
thresholds. A learner's correct model_forward (the self-study notebook's, written from scratch) draws the same
picture; one that raises or returns the wrong thing is reported in one line, and a fixed cell is picked up.
"""

import nbformat
import numpy as np
import pytest

from attention_lab.a09_tiny_gpt import heads as H
from attention_lab.a09_tiny_gpt import visual as vis
from attention_lab.a09_tiny_gpt.weights import load_weights, training_summary
from attention_lab.core import explorer as explorer_module
from attention_lab.core.plots import COLOUR_SCALES
from autograder.assignments.a09_tiny_gpt import analysis, data, findings, model
from autograder.assignments.a09_tiny_gpt import reference as ref
from conftest import REPO
from notebook_harness import namespace_with

NOTEBOOK = REPO / "notebooks" / "09_tiny_gpt_explorer.ipynb"


@pytest.fixture(scope="module")
def weights():
    return load_weights()


@pytest.fixture(scope="module")
def model_config(weights):
    params, config = weights
    return ref.model_config(params, config)


@pytest.fixture(scope="module")
def explorer(weights):
    """One explorer on the reference's model_forward, shared: its measurements are computed once."""
    return vis.HeadsExplorer(ref.model_forward, *weights, sync=True)


def reference_weights(params, config, tokens):
    """(n_layers, n_heads, T, T): each layer's input computed block by block, then reference.attention_weights."""
    cfg = ref.model_config(params, config)
    x = params["W_emb"][tokens] + params["W_pos"][:len(tokens)]
    out = []
    for layer in range(cfg.n_layers):
        h = model.layer_norm(x, params[f"block{layer}.ln1.gain"], params[f"block{layer}.ln1.bias"], cfg.ln_eps)
        out.append(ref.attention_weights(h, params[f"block{layer}.W_q"], params[f"block{layer}.W_k"], cfg.n_heads))
        x, _ = ref.decoder_block(x, params, layer, cfg.n_heads, cfg.ln_eps)
    return np.stack(out)


def test_the_task_sequences_are_the_graders():
    for seed, n, T, lengths in ((0, 5, 33, (3, 12)), (7, 40, 33, (5, 5)), (3, 2, 10, (1, 19))):
        ours = H.repeated_blocks(n, T, 20, lengths, np.random.default_rng(seed))
        theirs = data.repeated_blocks(n, T, 20, lengths, np.random.default_rng(seed))
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])
        np.testing.assert_array_equal(H.predictable_targets(ours[1], T), data.predictable_targets(theirs[1], T))
    assert H.BLOCK_LENGTHS == tuple(training_summary()["task"]["block_lengths"])
    assert H.BOS == data.BOS and H.PATTERNS == analysis.PATTERNS
    with pytest.raises(ValueError, match="block_lengths=\\(3, 20\\)"):
        H.repeated_blocks(1, 33, 20, (3, 20), np.random.default_rng(0))


def test_weights_read_from_the_caches_equal_the_reference_attention_weights(weights):
    params, config = weights
    tokens = vis.task_sequence(4, 7, config)[:-1]
    calls = H.forward_calls(ref.model_forward, params, config, tokens[None])
    expected = reference_weights(params, config, tokens)
    np.testing.assert_allclose(calls["weights"][0], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(calls["weights"][0].sum(axis=-1), 1.0, atol=1e-12)


def test_zeroing_a_heads_rows_of_w_o_is_the_graders_head_mask(weights, model_config):
    params, config = weights
    tokens = vis.task_sequence(1, 9, config)[:-1]
    for layer, head in ((0, 0), (1, 0), (1, 1)):
        mask = np.ones((2, 2))
        mask[layer, head] = 0.0
        masked = model.forward(params, tokens, model_config, head_mask=mask).logits
        zeroed, _ = ref.model_forward(H.zeroed_head(params, config, layer, head), tokens, config)
        np.testing.assert_allclose(zeroed, masked, rtol=0, atol=1e-10)


def test_scores_entropy_and_profiles_equal_the_graders_analysis(explorer, weights, model_config):
    params, _ = weights
    inputs = explorer.measure_tokens[:, :-1]
    measures = explorer.measured.measures
    for name, value in analysis.pattern_scores(params, model_config, inputs).items():
        np.testing.assert_allclose(measures.scores[name], value, rtol=0, atol=1e-12)
    np.testing.assert_allclose(measures.entropy, analysis.normalised_entropy(params, model_config, inputs),
                               rtol=0, atol=1e-12)
    for layer, head in ((0, 0), (1, 1)):
        profile = analysis.position_profile(params, model_config, layer, head, inputs)
        np.testing.assert_allclose(measures.previous_profile[layer, head], profile["previous"], atol=1e-12)
        np.testing.assert_allclose(measures.bos_profile[layer, head], profile["bos"], atol=1e-12)


def test_ablation_accuracy_equals_an_independent_count_with_the_head_mask(explorer, weights, model_config):
    params, _ = weights
    tokens, lengths = explorer.measure_tokens, explorer.measure_lengths
    predictable = data.predictable_targets(lengths, tokens.shape[1])
    expected = []
    for chosen in [None, (0, 0), (0, 1), (1, 0), (1, 1)]:
        mask = np.ones((2, 2))
        if chosen:
            mask[chosen] = 0.0
        logits = model.forward(params, tokens[:, :-1], model_config, head_mask=mask).logits
        expected.append((logits.argmax(-1) == tokens[:, 1:])[predictable].mean())
    np.testing.assert_allclose(explorer.measured.measures.accuracy, expected, rtol=0, atol=0)
    assert explorer.measured.measures.n_predictable == predictable.sum()
    # what the notebook says of the ablation holds on these sequences (findings.py's thresholds)
    none, l0h0, l0h1, l1h0, l1h1 = expected
    assert none == 1.0 and l1h0 < 0.1 and l0h0 < 0.3 and min(l0h1, l1h1) > 0.99


def test_descriptions_say_what_the_findings_say_with_their_thresholds(explorer):
    m = explorer.measured.measures
    # findings.py's predicates, on the explorer's own measurements
    measured = findings.Measurements(
        sampled_scores=m.scores, fresh_scores=m.scores, entropy=m.entropy,
        l0h0_profile={"previous": m.previous_profile[0, 0], "bos": m.bos_profile[0, 0]},
        ablation={}, long_blocks={}, sampled_sequences=np.zeros((0, 32)))
    for finding in findings.FINDINGS:
        if finding.name in ("previous_token_head", "induction_head", "diffuse_heads"):
            assert finding.holds(measured), finding.name
    described = {(layer, head): H.describe_head(m, layer, head) for layer in (0, 1) for head in (0, 1)}
    assert described[1, 0].startswith("L1H0: an induction head — ")
    assert ("L0H0: a previous-token head at positions 1–13 (there at least 0.9 of its weight is on the previous "
            "token); at positions 14–30 it puts at least 0.8 on BOS and at most 0.1 on the previous token; focused"
            ) in described[0, 0]
    for head in ((0, 1), (1, 1)):
        assert described[head].startswith(f"L{head[0]}H{head[1]}: almost uniform: mean entropy 0.9")
        assert "induction" not in described[head] and "previous-token" not in described[head]


def synthetic(**scores):
    """Measurements of one head (1 × 1) with the given pattern scores, flat profiles and an entropy."""
    entropy = scores.pop("entropy")
    values = {name: np.array([[scores.get(name, 0.0)]]) for name in H.PATTERNS}
    T = 32
    previous = np.full((1, 1, T), scores.get("previous", 0.0))
    previous[..., 0] = np.nan  # position 0 has no previous token
    return H.HeadMeasures(values, np.array([[entropy]]), previous, np.full((1, 1, T), scores.get("bos", 0.0)),
                          np.ones(2), 100)


@pytest.mark.parametrize("scores, says, does_not_say", [
    (dict(induction=0.9, duplicate=0.1, previous=0.1, entropy=0.2), "an induction head", "no pattern"),
    (dict(induction=0.89, duplicate=0.05, previous=0.05, entropy=0.2), "no pattern reaches", "an induction head"),
    (dict(induction=0.95, duplicate=0.11, entropy=0.2), "no pattern reaches", "an induction head"),
    (dict(previous=0.9, entropy=0.1), "a previous-token head at positions 1–31", "induction"),
    (dict(previous=0.89, entropy=0.5), "no pattern reaches", "a previous-token head"),
    (dict(previous=0.2, entropy=0.9), "almost uniform", "no pattern reaches"),
    (dict(previous=0.21, entropy=0.95), "no pattern reaches", "almost uniform"),
    (dict(bos=0.5, entropy=0.3), "focused: mean entropy 0.30", "uniform"),
])
def test_each_threshold_of_a_description_is_findings_own(scores, says, does_not_say):
    text = H.describe_head(synthetic(**scores), 0, 0)
    assert says in text and does_not_say not in text


def test_the_map_bars_and_summary_follow_every_control(explorer, weights):
    params, config = weights
    for control, value in (("layer_buttons", 0), ("head_buttons", 1), ("seed_slider", 9), ("length_slider", 12),
                           ("layer_buttons", 1), ("head_buttons", 0)):
        setattr(getattr(explorer, control), "value", value)
        s = explorer.settings
        tokens = vis.task_sequence(s.seed, s.block_length, config)
        expected = reference_weights(params, config, tokens[:-1])[s.layer, s.head]
        assert explorer.error is None
        np.testing.assert_allclose(explorer.view.weights, expected, atol=1e-12)
        np.testing.assert_allclose(np.ma.getdata(explorer.figure.image.get_array()), expected, atol=1e-12)
        zeroed = 1 + 2 * s.layer + s.head
        colours = [bar.get_facecolor() for bar in explorer.figure.ablation_bars]
        assert [c == colours[zeroed] for c in colours].count(True) == 1  # only the selected head's bar is red
        heights = [bar.get_height() for bar in explorer.figure.ablation_bars]
        np.testing.assert_array_equal(heights, explorer.measured.measures.accuracy)
        assert explorer.view.description in explorer.summary.value.replace("&#x27;", "'")
        # the counts on the sequence shown, independently: the reference with the grader's head mask
        mask = np.ones((2, 2))
        mask[s.layer, s.head] = 0.0
        cfg = ref.model_config(params, config)
        predictable = data.predictable_targets([s.block_length], len(tokens))[0]
        before = (ref.model_forward(params, tokens[:-1], config)[0].argmax(-1) == tokens[1:])[predictable].sum()
        after = (model.forward(params, tokens[:-1], cfg, head_mask=mask).logits.argmax(-1)
                 == tokens[1:])[predictable].sum()
        assert explorer.view.sequence_right == (before, after, predictable.sum())
        assert f"from {before}/{predictable.sum()} to {after}/{predictable.sum()} right" in explorer.summary.value
    # the answer circles: in each row whose token occurred before, the key right after an earlier occurrence
    rows, keys = explorer.view.answers
    tokens = explorer.view.tokens
    assert len(rows) and all(tokens[k - 1] == tokens[r] and k - 1 < r for r, k in zip(rows, keys))


def test_a_colour_scale_is_drawn_once_and_reused(explorer):
    assert set(explorer.figure.backgrounds) == set(COLOUR_SCALES)  # all drawn when the explorer starts
    kept = dict(explorer.figure.backgrounds)
    for name in COLOUR_SCALES:
        explorer.colour_dropdown.value = name
        assert explorer.figure.background is kept[name] and explorer.figure.colour_scale.name == name
        values = np.ma.getdata(explorer.figure.image.get_array())
        np.testing.assert_allclose(values, COLOUR_SCALES[name].values(explorer.view.weights))
    explorer.colour_dropdown.value = vis.DEFAULT_SCALE


def notebook_namespace():
    """The self-study notebook's code cells but the last (the explorer's), run in one namespace."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert "explore_heads(model_forward, params, config" in code[-1]
    namespace = {}
    for source in code[:-1]:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    return namespace


def test_the_notebooks_model_forward_is_a_learners_correct_one_and_draws_the_same_picture(explorer, weights):
    namespace = notebook_namespace()
    learner = namespace["model_forward"]
    params, config = weights
    tokens = vis.task_sequence(3, 6, config)
    logits, caches = learner(params, tokens[:-1], config)
    expected_logits, expected_caches = ref.model_forward(params, tokens[:-1], config)
    np.testing.assert_allclose(logits, expected_logits, atol=1e-10)
    for (K, V), (K_ref, V_ref) in zip(caches, expected_caches):
        np.testing.assert_allclose(K, K_ref, atol=1e-12)
        np.testing.assert_allclose(V, V_ref, atol=1e-12)
    # with a cache: the last token alone, after the others
    step, _ = learner(params, tokens[-2:-1], config, caches=ref.model_forward(params, tokens[:-2], config)[1])
    np.testing.assert_allclose(step[0], expected_logits[-1], atol=1e-10)
    mine = vis.HeadsExplorer(learner, params, config, seed=explorer.settings.seed,
                             block_length=explorer.settings.block_length, sync=True)
    assert mine.error is None
    np.testing.assert_allclose(mine.view.weights, explorer.view.weights, atol=1e-10)
    np.testing.assert_array_equal(mine.measured.measures.accuracy, explorer.measured.measures.accuracy)
    assert mine.view.description == explorer.view.description


def test_a_model_forward_that_raises_is_one_line_and_a_fixed_cell_is_picked_up(weights):
    params, config = weights
    namespace = namespace_with({"forward": "def model_forward(params, tokens, config, caches=None):\n"
                                           "    raise NotImplementedError('the blocks')"})
    explorer = vis.HeadsExplorer(namespace["model_forward"], params, config, sync=True)
    assert explorer.view is None and explorer.error == "model_forward raised NotImplementedError: the blocks"
    assert "⚠ model_forward raised NotImplementedError: the blocks" in explorer.summary.value
    assert "Traceback" not in explorer.summary.value and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert np.isnan(np.ma.getdata(explorer.figure.image.get_array())).all()
    assert all(bar.get_height() == 0 for bar in explorer.figure.ablation_bars + explorer.figure.pattern_bars)
    exec("def model_forward(params, tokens, config, caches=None):\n    return reference(params, tokens, config, caches)",
         {**namespace, "reference": ref.model_forward}, namespace)
    explorer.head_buttons.value = 1
    assert explorer.error is None and explorer.view.description.startswith("L1H1: almost uniform")


@pytest.mark.parametrize("returned, message", [
    ("logits", "returned ndarray; expected a pair (logits, caches)"),
    ("logits[:, :5], caches", "returned logits of shape (32, 5)"),
    ("logits, caches[:1]", "returned 1 caches; expected one cache (K, V) per layer, 2 in all"),
    ("logits, [(K.transpose(1, 0, 2), V) for K, V in caches]",
     "the cache of layer 0 is K of shape (32, 2, 16); expected (K, V), each of shape (n_heads, T, d_head) = (2, 32, 16)"),
    ("logits * np.nan, caches", "returned NaN or infinite logits"),
])
def test_a_model_forward_that_returns_the_wrong_thing_is_explained(explorer, weights, returned, message):
    params, config = weights
    namespace = namespace_with({})
    exec("def model_forward(params, tokens, config, caches=None):\n"
         "    logits, caches = reference(params, tokens, config, caches)\n"
         f"    return {returned}", {**namespace, "reference": ref.model_forward}, namespace)
    with pytest.raises(vis.HeadsError) as raised:  # what the explorer shows in its red line (one case below)
        vis.run_model(namespace["model_forward"], params, config, explorer.measure_tokens[:1, :-1])
    assert message in str(raised.value)
    assert str(raised.value).startswith("model_forward(params, tokens of shape (32,), config)")
    if returned == "logits":
        shown = vis.HeadsExplorer(namespace["model_forward"], params, config, sync=True)
        assert shown.view is None and shown.error == str(raised.value) and message in shown.summary.value


def test_a_model_forward_that_changes_its_parameters_in_place_changes_nothing_shown(explorer, weights):
    params, config = weights
    kept = {name: value.copy() for name, value in params.items()}

    def model_forward(p, tokens, config, caches=None):
        logits, caches = ref.model_forward(p, tokens, config, caches)
        for value in p.values():
            value *= 0.0
        return logits, caches

    inputs = explorer.measure_tokens[:3, :-1]
    expected = vis.run_model(ref.model_forward, params, config, inputs)
    changed = vis.run_model(model_forward, params, config, inputs)
    assert all(np.array_equal(params[name], kept[name]) for name in params)
    np.testing.assert_array_equal(changed["weights"], expected["weights"])
    np.testing.assert_array_equal(changed["predictions"], expected["predictions"])


def test_bad_settings_name_the_argument(weights):
    params, config = weights
    for kwargs, message in ((dict(block_length=13), "block_length must be an integer from 3 to 12"),
                            (dict(layer=2), "layer must be an integer from 0 to 1"),
                            (dict(head=-1), "head must be an integer from 0 to 1"),
                            (dict(seed=100), "seed must be an integer from 0 to 99"),
                            (dict(colour_scale="log"), "colour_scale must be one of")):
        with pytest.raises(ValueError, match=message):
            vis.HeadsExplorer(ref.model_forward, params, config, sync=True, **kwargs)
    with pytest.raises(ValueError, match="config must be a mapping with ln_eps"):
        vis.HeadsExplorer(ref.model_forward, params, {k: v for k, v in config.items() if k != "ln_eps"})
    with pytest.raises(ValueError, match="params must be a mapping of parameter arrays with block1.W_o"):
        vis.HeadsExplorer(ref.model_forward, {k: v for k, v in params.items() if k != "block1.W_o"}, config)


def test_not_shown_under_nbgrader(monkeypatch, capsys, weights):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert vis.explore_heads(ref.model_forward, *weights) is None
    assert "(the head explorer is not shown while grading)" in capsys.readouterr().out


def test_controls_have_labels_and_tooltips_and_the_axes_say_query_and_key_position(explorer):
    assert isinstance(explorer, explorer_module.Explorer) and "redraw" not in vars(vis.HeadsExplorer)
    for control in (explorer.seed_slider, explorer.resample, explorer.length_slider, explorer.layer_buttons,
                    explorer.head_buttons, explorer.colour_dropdown):
        assert control.description and control.tooltip
    assert explorer.figure.map_ax.get_xlabel() == "key position"
    assert explorer.figure.map_ax.get_ylabel() == "query position"


def test_a_burst_of_key_presses_makes_one_redraw_of_the_last_sequence(weights):
    import asyncio

    params, config = weights

    async def scenario():
        explorer = vis.HeadsExplorer(ref.model_forward, params, config)  # coalescing, as in a notebook
        start = explorer.redraws
        for seed in range(1, 11):  # ten presses of the seed slider's arrow key
            explorer.seed_slider.value = seed
        assert explorer.redraws == start
        await explorer.drawn()
        return explorer, explorer.redraws - start

    explorer, redraws = asyncio.run(scenario())
    assert redraws == 1 and explorer.settings.seed == 10
    tokens = vis.task_sequence(10, explorer.settings.block_length, config)
    np.testing.assert_array_equal(explorer.view.tokens, tokens)
    np.testing.assert_allclose(explorer.view.weights, reference_weights(params, config, tokens[:-1])[1, 0],
                               atol=1e-12)


def test_a_hanging_model_forward_is_stopped_after_one_time_limit(monkeypatch, weights):
    monkeypatch.setattr(explorer_module, "CALL_SECONDS", 0.2)
    namespace = namespace_with({"forward": "def model_forward(params, tokens, config, caches=None):\n"
                                           "    while True:\n        pass"})
    explorer = vis.HeadsExplorer(namespace["model_forward"], *weights, sync=True)
    assert explorer.view is None and explorer.error.startswith("model_forward raised FunctionTimedOut")
    assert "did not finish within 0.2 s" in explorer.error
