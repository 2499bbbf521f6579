"""README "Adding a step", followed on a temporary copy of the course (issue 11).

The test does what the walkthrough tells a maintainer to do — and nothing else: it edits the hand-edited
files the walkthrough names (the source notebook, the assignment's ``reference.py`` and ``spec.py``),
regenerates what the walkthrough says to regenerate (``python -m autograder release`` and
``python -m autograder worked-cases``), and then grades a correct and a wrong answer for the new step
with the copy's own grader, and runs the copy's visible self-check on both. If a new step needed a
fifth file, a hand-kept list, or another command, this test fails.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from clone_support import git, make_clone
from conftest import ASSIGNMENT, NOTEBOOK, REPO

pytestmark = pytest.mark.slow

FOLDER = "autograder/assignments/a01_attention"
STUDENT_FOLDER = "attention_lab/a01_attention"

#: The walkthrough's example step: the effective number of keys a query attends to, exp(H) (a perplexity).
REFERENCE = '''

def effective_keys(weights):
    """The effective number of keys each query attends to: exp of the row's entropy in nats.

    A one-hot row gives 1, a row spread evenly over n keys gives n (the exponential of Shannon entropy,
    the perplexity; Hill 1973's number of order 1).

    Parameters
    ----------
    weights : array_like of float, shape (..., T_q, T_k)
        Attention weights, each row summing to 1.

    Returns
    -------
    numpy.ndarray of float, shape (..., T_q)
        Between 1 and T_k.

    Raises
    ------
    ValueError
        As :func:`attention_entropy`.
    """
    return np.exp(attention_entropy(weights))
'''

CASES = '''

@STEPS.add("test_effective_keys", "eff_keys")
def _effective_keys_cases(seed: int = 2025):
    rng = np.random.default_rng(seed)
    rows = np.exp(rng.normal(0, 2, (2, 3, 5)))
    return [
        Case("random rows with batch dimensions", "effective_keys", (rows / rows.sum(-1, keepdims=True),),
             outputs=("the effective numbers of keys",)),
        Case("a one-hot and a uniform row", "effective_keys", (np.vstack([np.eye(4)[[1]], np.full((1, 4), 0.25)]),),
             outputs=("the effective numbers of keys",)),
    ]


# ---- worked cases'''

WORKED = '''        Case("effective keys of a one-hot and a uniform row over 4 keys", "effective_keys",
             (np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]),), outputs=("the effective numbers of keys",)),
'''

SOLUTION = '''def effective_keys(weights):
    """exp of the entropy in nats of each row of `weights` (..., T_q, T_k) -> (..., T_q)."""
    ### BEGIN SOLUTION
    return np.exp(attention_entropy(weights))
    ### END SOLUTION
'''
CHECK = 'checks.check_worked_cases(effective_keys)\n'
TEST = '''# Autograder tests for step 8 (1 point): the effective number of keys, exp of the entropy in nats.
checks.expect_shapes(effective_keys, [(2, 3)], np.full((2, 3, 4), 0.25))
### BEGIN HIDDEN TESTS
from autograder.grader.in_notebook import grade_step; grade_step(globals(), "01_scaled_dot_product_attention", "test_effective_keys")
### END HIDDEN TESTS
'''

ANSWERS = {
    "correct, written otherwise": "def effective_keys(weights):\n    return np.e ** attention_entropy(weights)\n",
    "wrong: in bits": "def effective_keys(weights):\n    return 2.0 ** attention_entropy(weights)\n",
}


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"the walkthrough's anchor is not once in {path.name}: {old!r}"
    path.write_text(text.replace(old, new))


def add_the_step(course: Path) -> list[str]:
    """The walkthrough's hand edits; returns the files edited (relative paths)."""
    # 1. reference.py: the function, reading like the math
    (course / FOLDER / "reference.py").write_text((course / FOLDER / "reference.py").read_text() + REFERENCE)
    # 2. spec.py: the function among the reference's, its step (a case builder marked with the step's grade_id and
    #    title, after the entropy step's: steps are in notebook order) and a worked case
    spec = course / FOLDER / "spec.py"
    _replace_once(spec, "causal_self_attention attention_entropy", "causal_self_attention attention_entropy effective_keys")
    _replace_once(spec, "\n\n# ---- worked cases", CASES)
    text = spec.read_text()
    end = re.search(r'outputs=\("the entropies",\)\),\n(\s*)\)\n', text[text.index("def _worked_cases"):])
    assert end, "the worked cases' tuple ends with the entropy case"
    at = text.index("def _worked_cases") + end.end() - len(end.group(1)) - 2
    spec.write_text(text[:at] + WORKED + text[at:])
    # 3. the source notebook: the step's cells, copied from the entropy step's and renamed
    path = course / "source" / ASSIGNMENT / NOTEBOOK
    nb = nbformat.read(str(path), as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    at = ids.index("test_attention_entropy") + 1
    new = [nbformat.v4.new_markdown_cell("### Step 8 — the effective number of keys\n\n"
                                         "**Your task:** `effective_keys(weights)` = $e^{H_i}$, the entropy in nats "
                                         "exponentiated: 1 for a one-hot row, $n$ for a row spread evenly over $n$ keys.")]
    for template, source, grade_id in (("attention_entropy", SOLUTION, "effective_keys"),
                                       ("check_attention_entropy", CHECK, "check_effective_keys"),
                                       ("test_attention_entropy", TEST, "test_effective_keys")):
        cell = copy.deepcopy(nb.cells[ids.index(template)])
        cell.source, cell.metadata.nbgrader.grade_id = source, grade_id
        cell.id = f"walkthrough-{grade_id}".replace("_", "-")
        new.append(cell)
    nb.cells[at:at] = new
    nbformat.write(nb, str(path))
    return [f"{FOLDER}/reference.py", f"{FOLDER}/spec.py", f"source/{ASSIGNMENT}/{NOTEBOOK}"]


def _run(course: Path, *args: str) -> subprocess.CompletedProcess:
    # cwd = the copy: `python -m autograder` and `import attention_lab` resolve to the copy's packages
    env = {**os.environ, "PYTHONPATH": str(course), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *args], cwd=course, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done


GRADE = textwrap.dedent('''
    import json, sys
    from autograder import assignments
    from autograder.grader.in_process import grade_variant
    from autograder.grader.spec import Variant
    from attention_lab.a01_attention import checks
    from attention_lab.core.worked import SelfCheckFailed
    assignment = assignments.get("01_scaled_dot_product_attention")
    out = {"points": {s.grade_id: None for s in assignment.steps}, "answers": {}}
    for label, source in json.loads(sys.argv[1]).items():
        verdicts = grade_variant(assignment, Variant(label, {"effective_keys": source}))
        namespace = {}
        exec("import numpy as np\\nfrom autograder.assignments.a01_attention.reference import attention_entropy\\n"
             + source, namespace)
        try:
            checks.check_worked_cases(namespace["effective_keys"])
            check = "passed"
        except SelfCheckFailed as failed:
            check = str(failed)
        out["answers"][label] = {"scores": {g: [v.score, v.points] for g, v in verdicts.items()},
                                 "text": verdicts["test_effective_keys"].text(), "check": check}
    print(json.dumps(out))
''')


def test_adding_a_step_to_assignment_1_as_the_readme_says(tmp_path):
    readme = (REPO / "README.md").read_text()
    walkthrough = readme.split("#### Adding a step", 1)[1].split("\n#### ", 1)[0]
    course = make_clone(REPO, tmp_path / "course")
    edited = add_the_step(course)
    for path in edited:  # the walkthrough names every file the test edits, and no more than four
        assert f"`{path.replace(ASSIGNMENT, '<assignment>').replace(NOTEBOOK, '<notebook>.ipynb')}`" in walkthrough or \
            f"`{Path(path).name}`" in walkthrough, path
    assert len(edited) <= 4
    for command in ("python -m autograder release", "python -m autograder worked-cases"):
        assert command in walkthrough
        _run(course, "-m", "autograder", *command.split()[3:], *([ASSIGNMENT] if command.endswith("release") else []))
    changed = {line[3:] for line in git("status", "--porcelain", cwd=course).splitlines()}
    regenerated = changed - set(edited)
    assert regenerated == {f"release/{ASSIGNMENT}/{NOTEBOOK}", f"{STUDENT_FOLDER}/worked_cases.json"}, changed

    released = nbformat.read(str(course / "release" / ASSIGNMENT / NOTEBOOK), as_version=4)
    cell = next(c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "effective_keys")
    assert "raise NotImplementedError" in cell.source and "np.exp" not in cell.source
    test_cell = next(c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_effective_keys")
    assert "grade_step" not in test_cell.source and "expect_shapes" in test_cell.source
    stored = json.loads((course / STUDENT_FOLDER / "worked_cases.json").read_text())
    assert "effective_keys" in json.dumps(stored)

    graded = json.loads(_run(course, "-c", GRADE, json.dumps(ANSWERS)).stdout.splitlines()[-1])  # after the ✓ lines
    assert "test_effective_keys" in graded["points"]
    right, wrong = graded["answers"]["correct, written otherwise"], graded["answers"]["wrong: in bits"]
    assert all(score == points for score, points in right["scores"].values()), right
    assert right["scores"]["test_effective_keys"] == [1, 1] and right["check"] == "passed"
    assert wrong["scores"]["test_effective_keys"][0] == 0, wrong
    assert all(score == points for g, (score, points) in wrong["scores"].items() if g != "test_effective_keys"), wrong
    assert "effective" in wrong["check"] or "expected" in wrong["check"], wrong["check"]

    # the copy's own fast tests of notebooks, worked cases and course lists pass with the new step (metadata
    # consistent, the self-checks know every course function, the stored worked cases current and right, the
    # cell's stated points, the steps in notebook order)
    _run(course, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "tests/test_notebooks.py", "tests/test_worked_cases.py", "tests/test_course_lists.py", "tests/test_spec_helpers.py")

