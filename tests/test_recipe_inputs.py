"""Hidden inputs the kernel can make itself travel as their recipe (attention_lab.core.values.RecipeArray).

Assignment 7's T = 20 000 case (arrays drawn from a seed, SeededNormal) sent 3.8 MB of arrays as a 6.8 MB probe
cell, and assignment 9's cases the trained model (PackageArray: its weights.npz) in 0.8 MB cells, which each
student's kernel spent seconds reading. Here: a recipe makes exactly the arrays the case holds; only an array that
still holds its recipe's values is sent as a recipe; the probe reads an untouched argument back as its recipe and a
changed one as its data, so the grader's in-place check sees the change; a recipe out of bounds, malformed, naming
a file outside the package or an array whose bytes differ is refused with a ValueError.
"""

import numpy as np
import pytest

from attention_lab.core import probe
from attention_lab.core import values as wire
from autograder.assignments import get
from autograder.grader.in_process import grader_for
from autograder.grader.probe_output import screen_results
from autograder.nbgrader.preprocessors import probe_source


def test_the_recipe_draws_the_arrays_the_generator_draws_one_after_the_other():
    rng = np.random.default_rng(11)
    expected = [rng.normal(size=(5, 3)) for _ in range(3)]
    drawn = wire.seeded_normals(11, (5, 3), 3)
    for index, (array, want) in enumerate(zip(drawn, expected)):
        sent = wire.encode(array)
        assert sent == {"seeded_normal": {"seed": 11, "shape": [5, 3], "count": 3, "index": index}}
        back = wire.decode(sent)
        assert type(back) is np.ndarray and back.flags.writeable and np.array_equal(back, want)
        assert np.array_equal(array, want)


def test_a_derived_or_changed_array_is_sent_as_its_data():
    array = wire.seeded_normals(3, (4,), 1)[0]
    assert set(wire.encode(array[:2])) == {"ndarray"} and set(wire.encode(array * 2)) == {"ndarray"}
    changed = wire.seeded_normals(3, (4,), 1)[0]
    changed[0] += 1.0
    sent = wire.encode(changed)
    assert set(sent) == {"ndarray"} and np.array_equal(wire.decode(sent), changed)  # never the stale recipe


@pytest.mark.parametrize("recipe, words", [
    ({"seed": 1, "shape": [2**12, 2**11], "count": 1, "index": 0}, "out of bounds"),
    ({"seed": 1, "shape": [2], "count": 9, "index": 0}, "out of bounds"),
    ({"seed": 1, "shape": [2], "count": 2, "index": 2}, "out of bounds"),
    ({"seed": -1, "shape": [2], "count": 1, "index": 0}, "out of bounds"),
    ({"seed": 1.5, "shape": [2], "count": 1, "index": 0}, "integer"),
    ({"seed": 1, "shape": [-2], "count": 1, "index": 0}, "integer"),
    ({"seed": 1, "shape": "2", "count": 1, "index": 0}, "integer"),
    ({"seed": 1, "shape": [2], "count": 1}, "keys"),
    ([1, [2], 1, 0], "keys"),
])
def test_a_recipe_out_of_bounds_or_malformed_is_refused(recipe, words):
    with pytest.raises(ValueError, match=words):
        wire.decode({"seeded_normal": recipe})


def test_the_probe_reads_an_untouched_argument_back_as_its_recipe_and_a_changed_one_as_its_data():
    x = wire.seeded_normals(5, (3, 4), 1)[0]
    case = {"function": "f", "args": [wire.encode(x)], "kwargs": {}, "seconds": 5}
    keeps = probe.call_case({"f": lambda a: a.sum(axis=-1)}, case)
    assert keeps["status"] == "returned" and keeps["args_after"] == case["args"]
    changes = probe.call_case({"f": lambda a: a.__imul__(2.0).sum(axis=-1)}, case)
    screened, problem = screen_results({"grade_id": "g", "cases": [case]}, {"results": [changes]})
    assert problem is None
    after = wire.decode(screened["results"][0]["args_after"][0])
    assert np.array_equal(after, 2.0 * x) and not np.array_equal(after, x)  # the grader sees the change


def test_a_kernel_cannot_send_a_recipe_the_grader_would_not_draw():
    forged = {"status": "returned", "value": {"seeded_normal": {"seed": 1, "shape": [2**30], "count": 1, "index": 0}},
              "args_after": [], "warnings": [], "calls": [], "calls_dropped": 0}
    screened, problem = screen_results({"grade_id": "g", "cases": [{"args": []}]}, {"results": [forged]})
    value = screened["results"][0]["value"]
    with pytest.raises(ValueError, match="out of bounds"):
        wire.decode(value)


def test_assignment_7_s_memory_case_goes_into_the_kernel_as_recipes():
    grader = grader_for(get("07_tiled_attention"))
    (case,) = grader.cases["test_tiled_attention_memory"]
    request = grader.request("test_tiled_attention_memory")
    assert [set(a) for a in request["cases"][0]["args"][:3]] == [{"seeded_normal"}] * 3
    assert len(probe_source(request)) < 4096  # was 6.8 MB: three 20 000 × 8 arrays as base64 .npy in JSON in base64
    assert all(np.array_equal(wire.decode(sent), arg) for sent, arg in zip(request["cases"][0]["args"][:3], case.args))


WEIGHTS = "a09_tiny_gpt/weights.npz"


def test_a_package_array_goes_as_its_name_and_comes_back_as_the_stored_array():
    stored = np.load(wire.PACKAGE_ROOT / WEIGHTS, allow_pickle=False)
    arrays = wire.package_arrays(WEIGHTS)
    assert list(arrays) == list(stored.files)
    for key, array in arrays.items():
        sent = wire.encode(array)
        assert set(sent) == {"package_array"} and sent["package_array"]["key"] == key
        back = wire.decode(sent)
        assert type(back) is np.ndarray and back.flags.writeable and np.array_equal(back, stored[key])
        assert back.dtype == stored[key].dtype and back.shape == stored[key].shape


def test_a_changed_or_derived_package_array_is_sent_as_its_data():
    arrays = wire.package_arrays(WEIGHTS)
    W_emb = arrays["W_emb"]
    assert set(wire.encode(W_emb[[0, 1]])) == {"ndarray"} and set(wire.encode(W_emb @ W_emb.T)) == {"ndarray"}
    W_emb[0, 0] += 1.0
    sent = wire.encode(W_emb)
    assert set(sent) == {"ndarray"} and np.array_equal(wire.decode(sent), W_emb)


@pytest.mark.parametrize("change, words", [
    ({"file": "../core/weights.npz"}, "outside the package"),
    ({"file": "/etc/passwd.npz"}, "outside the package"),
    ({"file": "a09_tiny_gpt/missing.npz"}, "has no array"),
    ({"key": "not_a_weight"}, "has no array"),
    ({"key": "W_emb; import os"}, "outside the package"),
    ({"sha256": "0" * 64}, "differs from the grader's"),
    ({"sha256": 7}, "dict of strings"),
])
def test_a_package_array_recipe_that_names_anything_else_is_refused(change, words):
    recipe = {**wire.encode(wire.package_arrays(WEIGHTS)["W_emb"])["package_array"], **change}
    with pytest.raises(ValueError, match=words):
        wire.decode({"package_array": recipe})


def test_the_probe_reads_an_untouched_weight_back_as_its_name_and_a_changed_one_as_its_data():
    W = wire.package_arrays(WEIGHTS)["block0.W_q"]
    case = {"function": "f", "args": [wire.encode(W)], "kwargs": {}, "seconds": 5}
    assert probe.call_case({"f": lambda a: a.sum()}, case)["args_after"] == case["args"]
    changes = probe.call_case({"f": lambda a: a.__iadd__(1.0).sum()}, case)
    assert np.array_equal(wire.decode(changes["args_after"][0]), np.asarray(W) + 1.0)


def test_assignment_9_s_cases_send_the_trained_model_by_name():
    grader = grader_for(get("09_tiny_gpt"))
    request = grader.request("test_model_forward")
    params = request["cases"][0]["args"][0]["dict"]
    assert all(set(value) == {"package_array"} for _, value in params)
    assert len(probe_source(request)) < 64 * 1024  # was 0.8 MB: the model as base64 .npy in JSON in base64
    case = grader.cases["test_model_forward"][0]
    decoded = wire.decode(request["cases"][0]["args"][0])
    assert decoded.keys() == case.args[0].keys()
    assert all(np.array_equal(decoded[key], case.args[0][key]) for key in decoded)


@pytest.mark.parametrize("array", [wire.seeded_normals(21, (6, 2), 2)[1], wire.package_arrays(WEIGHTS)["ln_f.gain"]],
                         ids=["seeded_normal", "package_array"])
def test_changing_a_decoded_recipe_changes_no_later_decode(array):
    """Made arrays are kept (the same inputs are decoded for every answer graded): each decode is a fresh copy."""
    sent = wire.encode(array)
    first = wire.decode(sent)
    first += 1.0
    again = wire.decode(sent)
    assert np.array_equal(again, array) and again.flags.writeable and not np.shares_memory(again, first)
    assert set(wire.encode(array)) == set(sent)  # the kept array is not the case's: it still holds its recipe
