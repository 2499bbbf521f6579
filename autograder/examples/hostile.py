"""Hostile and broken submissions, each with what the grader must do about it.

Every case is a real submission folder graded by ``nbgrader autograde`` in
the same run as honest students (:mod:`autograder.examples.report`): it must not
crash the run, must not change anyone else's grade, must earn no more than
its honest part (also by what the grader's stand-ins tell its code, see
:mod:`autograder.grader.stand_ins`), and must leave a clear one-line reason where
it was not graded or its kernel was stopped. The submissions are built on assignment 1;
the defences (sandbox, out-of-kernel comparison, pre-checks) are the same for
every assignment.
"""

from __future__ import annotations

import html
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from autograder.assignments.a01_attention.spec import ASSIGNMENT as SPEC
from autograder.examples import hostile_payloads as payloads
from autograder.grader.in_process import points_of
from autograder.course import REPO
from autograder.nbgrader.notebook_cells import fill_release, nbgrader_meta, read_json

ASSIGNMENT = SPEC.name
NOTEBOOK = SPEC.notebook
POINTS = points_of(SPEC)  #: grade_id → points of each autograder-test cell of the source notebook
FULL = sum(POINTS.values())
#: what a submission keeps when its causal_mask cell stops: the points of the steps before the mask's test cell
BEFORE_MASK = sum(POINTS[step.grade_id] for step in SPEC.steps[:SPEC.steps.index(SPEC.step("test_causal_mask"))])
#: cells of the released notebook that every hostile submission starts from (a question added changes it)
RELEASE_CELLS = len(read_json(REPO / "release" / ASSIGNMENT / NOTEBOOK)["cells"])


@dataclass
class Context:
    """What a hostile submission is built from."""

    course_dir: Path
    release_nb: nbformat.NotebookNode
    solutions: dict[str, str]


@dataclass
class Outcome:
    """What grading did with one submission."""

    total: float | None  # None: not graded
    note: str
    named: list[str]
    autograded: nbformat.NotebookNode | None
    feedback: str
    course_dir: Path


@dataclass(frozen=True)
class Hostile:
    """A hostile or broken submission and the check of how it was handled.

    ``build(folder, context)`` writes the submission into ``folder``;
    ``check(outcome)`` returns None when it was handled as required, else what went wrong.
    """

    description: str
    build: Callable[[Path, Context], None]
    check: Callable[[Outcome], str | None]
    student: str | None = None  # the submission folder's name, when the attack is in it (default hostile-<key>)


# ---- building submissions ------------------------------------------------------------------------

def _write(folder: Path, context: Context, cells: dict[str, str], edit=None) -> None:
    nb = fill_release(context.release_nb, {**context.solutions, **cells})
    if edit is not None:
        edit(nb)
    nbformat.write(nb, str(folder / NOTEBOOK))


def with_cells(cells: Callable[[Context], dict[str, str]], edit=None):
    return lambda folder, context: _write(folder, context, cells(context), edit)


def prepend(cell: str, code: str):
    """The correct solution with ``code`` run at the top of solution cell ``cell``."""
    return with_cells(lambda c: {cell: f"{code}\n{c.solutions[cell]}"})


def _drop_test_cells(nb) -> None:
    nb.cells = [cell for cell in nb.cells if not (nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution"))]


def _drop_mask_cells(nb) -> None:
    nb.cells = [cell for cell in nb.cells if nbgrader_meta(cell).get("grade_id") not in ("causal_mask", "check_causal_mask")]


def _edit_test_cells(nb) -> None:
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution"):
            cell.source = f"print('all tests passed')\n{float(meta['points'])}"


def _bogus_kernelspec(nb) -> None:
    nb.metadata["kernelspec"] = {"name": "bash", "display_name": "Bash", "language": "bash"}


def _duplicate_solution(nb) -> None:
    index = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "causal_mask")
    pasted = nbformat.from_dict(nb.cells[index])
    pasted.id = f"{pasted.id}-pasted"  # JupyterLab gives a pasted cell a new id but keeps its nbgrader metadata
    nb.cells.insert(index, pasted)


def _widget_state(nb) -> None:
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {
        "x": {"model_name": "ImageModel", "state": {"value": "A" * 200_000}}}}}


def _probe_course_dir(context: Context) -> dict[str, str]:
    """Try to read and write the course directory from inside the kernel; print what happened."""
    root = context.course_dir
    targets = [root / "gradebook.db", root / "source" / ASSIGNMENT / NOTEBOOK, root / "nbgrader_config.py",
               root / "submitted" / "ada-correct" / ASSIGNMENT / NOTEBOOK]
    code = f"""import os
for _path in {[str(t) for t in targets]!r}:
    try:
        open(_path, 'rb').read(10)
        print('READ', _path)
    except Exception as _e:
        print('DENIED', type(_e).__name__, _path)
for _path in [{str(root / 'pwned.txt')!r}, {str(root / 'source' / 'pwned.txt')!r}]:
    try:
        open(_path, 'w').write('pwned')
        print('WROTE', _path)
    except Exception as _e:
        print('DENIED', type(_e).__name__, _path)
try:
    import autograder.assignments.a01_attention.reference
    print('IMPORTED autograder')
except Exception as _e:
    print('DENIED', type(_e).__name__, 'import autograder')
"""
    return {"softmax": code + context.solutions["softmax"]}


# ---- checks ----------------------------------------------------------------------------------------

def _expecting(text: str):
    """Label a check with what it requires, in words (shown in the report)."""
    def label(check):
        check.expectation = text
        return check
    return label


def graded(at_most: float, at_least: float | None = None, note: str | None = None):
    """Graded, with a total in [at_least, at_most] and, if given, a note containing ``note``."""
    low = at_most if at_least is None else at_least
    expectation = (f"graded {at_most:g}/{FULL:g}" if low == at_most else f"graded {low:g}–{at_most:g}/{FULL:g}") + (
        f", reason says “{note}”" if note else "")

    def check(outcome: Outcome) -> str | None:
        if outcome.total is None:
            return outcome.note or "not graded"
        if not low <= outcome.total <= at_most:
            return f"total {outcome.total:g}, expected between {low:g} and {at_most:g}"
        if note and note not in outcome.note:
            return f"note {outcome.note!r} does not say {note!r}"
        return None
    return _expecting(expectation)(check)


def as_honest(cells: Callable[[dict[str, str]], dict[str, str]], note: str | None = None):
    """Graded exactly as the honest part of the submission, ``cells(solutions)``, graded in-process.

    The honest part leaves out what the submission does to attack the grader, so a hostile
    submission that gains anything by its attack fails this check.
    """
    def check(outcome: Outcome) -> str | None:
        from autograder.grader.answers import source_solutions
        from autograder.grader.in_process import grade_answers

        solutions = source_solutions(ASSIGNMENT, NOTEBOOK)
        honest = sum(v.score for v in grade_answers(SPEC, cells(solutions)).values())
        return graded(honest, honest, note)(outcome)
    return _expecting("graded exactly as its honest part (its answers without the attack, graded in-process)")(check)


def not_graded(words: str):
    def check(outcome: Outcome) -> str | None:
        if outcome.total is not None:
            return f"graded ({outcome.total:g}) but should say why it cannot be"
        return None if words in outcome.note else f"reason {outcome.note!r} does not say {words!r}"
    return _expecting(f"not graded, reason says “{words}”")(check)


@_expecting(f"every read, write and import denied inside the kernel; nothing written; graded {FULL:g}/{FULL:g}")
def _sandboxed(outcome: Outcome) -> str | None:
    if outcome.autograded is None:
        return "no autograded notebook"
    text = "".join(o.get("text", "") for c in outcome.autograded.cells if c.cell_type == "code" for o in c.outputs)
    leaks = [line for line in text.splitlines() if line.startswith(("READ", "WROTE", "IMPORTED"))]
    if leaks:
        return f"the kernel reached the course directory: {leaks}"
    if text.count("DENIED") < 7:
        return "the attempts did not run"
    if any(outcome.course_dir.joinpath(*p).exists() for p in [("pwned.txt",), ("source", "pwned.txt")]):
        return "a file was written into the course directory"
    return graded(FULL)(outcome)


def _all_of(*checks):
    def check(outcome: Outcome) -> str | None:
        for one in checks:
            problem = one(outcome)
            if problem:
                return problem
        return None
    return _expecting("; ".join(one.expectation for one in checks))(check)


@_expecting("no saved widget state in the graded notebook")
def _no_widget_state(outcome: Outcome) -> str | None:
    if outcome.autograded is None or "widgets" in outcome.autograded.metadata:
        return "the saved widget state reached the autograded notebook"
    return None


@_expecting("feedback without hidden lines")
def _no_hidden_code_in_feedback(outcome: Outcome) -> str | None:
    for marker in ("BEGIN HIDDEN TESTS", "grade_step", "_attention_lab_probe", "from autograder"):
        if marker in outcome.feedback:
            return f"the feedback contains {marker!r}"
    return None


@_expecting("nothing printed or displayed while the stand-ins answered reaches the notebook or the feedback")
def _nothing_from_the_second_pass(outcome: Outcome) -> str | None:
    if outcome.autograded is None:
        return "no autograded notebook"
    shown = "".join(str(o.get("text", "")) + str(o.get("data", {})) for c in outcome.autograded.cells
                    if c.cell_type == "code" for o in c.outputs)
    for where, text in (("the autograded notebook", shown), ("the feedback", outcome.feedback)):
        if "STOLEN" in text:
            return f"what the kernel saw during the stand-in passes reached {where}"
    return None


# A later function asks the stand-ins for attention's answers on attention's own hidden inputs (stashed
# by attention when the grader's probe called it), stashes them, and attention returns them when it is
# run again; a call of softmax that never repeats keeps attention's cases coming back in every pass. It
# also tries to show what it stashed, by printing and by updating a display shown by an earlier cell.
STASH_AND_REPLAY = {
    "scaled_dot_product_attention": '''
import sys

_SEEN, _STASH = [], {}

def _key(Q, K, V, mask, scale):
    return (Q.tobytes(), K.tobytes(), V.tobytes(), None if mask is None else np.asarray(mask).tobytes(), scale)

def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    key = _key(Q, K, V, mask, scale)
    if key in _STASH:
        return _STASH[key]
    called_by_the_grader = sys._getframe(1).f_globals.get("__name__") == "attention_lab.core.probe"
    if called_by_the_grader and all(key != _key(*seen) for seen in _SEEN):
        _SEEN.append((Q, K, V, mask, scale))  # the hidden inputs of attention's own step
    softmax(np.random.default_rng().normal(size=3))
    raise ValueError("not written yet")
''',
    "causal_self_attention": '''
from IPython.display import display
_shown = display("nothing stolen yet", display_id=True)

def causal_self_attention(x, W_q, W_k, W_v, scale=True):
    for Q, K, V, mask, s in list(_SEEN):
        try:
            _STASH[_key(Q, K, V, mask, s)] = scaled_dot_product_attention(Q, K, V, mask=mask, scale=s)
        except BaseException:
            pass
    if _STASH:
        word = "STO" + "LEN"  # not in the source, so that the check finds only what ran
        print(word, len(_STASH))
        if _shown is not None:
            _shown.update(f"{word} {len(_STASH)}")
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    return scaled_dot_product_attention(Q, K, V, mask=causal_mask(x.shape[0]), scale=scale)
''',
}
UNWRITTEN_ATTENTION = ("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                       "    raise ValueError('not written yet')\n")

# the honest part of a submission whose causal_mask cell stops (interrupted, MemoryError, SystemExit)
NO_CAUSAL_MASK = lambda solutions: {"causal_mask": "# (the cell stopped before defining causal_mask)"}  # noqa: E731
WRONG_SOFTMAX = "def softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)\n"
IN_PLACE_SOFTMAX = ("def softmax(x, axis=-1):\n    x -= np.max(x, axis=axis, keepdims=True)\n    np.exp(x, out=x)\n"
                    "    x /= np.sum(x, axis=axis, keepdims=True)\n    return x\n")
# found by a reviewer: a wrapped call_case that blanks what the probe read back hid the in-place edit
HIDE_IN_PLACE = ("import attention_lab.core.probe as _p\n_original = _p.call_case\n"
                 "def _hiding(ns, case, *more):\n    r = _original(ns, case, *more)\n"
                 "    if r.get('status') == 'returned':\n"
                 "        r['args_after'] = [None] * len(r.get('args_after') or case['args']); r['warnings'] = []\n"
                 "    return r\n_p.call_case = _hiding\n")
FORGED_RUN = ("def run(namespace, payload):\n    from IPython.display import publish_display_data\n"
              "    from attention_lab.core import values\n    request = values.unpack(payload)\n"
              "    forged = {'status': 'returned', 'value': True, 'args_after': [], 'warnings': []}\n"
              "    publish_display_data({'application/vnd.attention-lab.probe+json': {'grade_id': request['grade_id'], "
              "'results': [forged for _ in request['cases']]}})\n")


def fake_probe(body: str) -> str:
    """Notebook code installing an import hook that serves ``body`` as ``attention_lab.core.probe``."""
    return ("import sys, importlib.abc, importlib.util\n"
            "class _FakeProbe(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        return importlib.util.spec_from_loader(name, self) if name == 'attention_lab.core.probe' else None\n"
            "    def create_module(self, spec):\n        return None\n"
            "    def exec_module(self, module):\n"
            f"        exec({body!r}, module.__dict__)\n"
            "sys.meta_path.insert(0, _FakeProbe())\n")

def feedback_says(words: str):
    """The feedback HTML (where the learner reads it) contains ``words``."""
    def check(outcome: Outcome) -> str | None:
        return None if words in html.unescape(outcome.feedback) else f"the feedback does not say {words!r}"
    return _expecting(f"feedback says “{words}”")(check)


def feedback_lacks(text: str, what: str):
    def check(outcome: Outcome) -> str | None:
        return f"the feedback holds {what}" if text in html.unescape(outcome.feedback) else None
    return _expecting(f"feedback without {what}")(check)


#: The one submission that carries every browser payload (the xss-<kind> cases; graded once, checked per kind).
XSS_STUDENT = "hostile-xss"


def _submitted(outcome: Outcome, student: str):
    """The notebook ``student`` handed in (as built), or None."""
    path = outcome.course_dir / "submitted" / student / ASSIGNMENT / NOTEBOOK
    return nbformat.read(str(path), as_version=4) if path.exists() else None


def _inert(kind: str):
    """Nothing of payload ``kind`` could run in a browser: in the stored notebook or the feedback HTML, no active
    content in the cells that carried it or named by its scripts, and none that names no payload or sits in a cell
    that carried none (that fails every kind: it cannot be told apart)."""
    @_expecting("nothing in the stored notebook or the feedback HTML could run in a browser")
    def check(outcome: Outcome) -> str | None:
        submitted = _submitted(outcome, XSS_STUDENT)
        if outcome.autograded is None or not outcome.feedback or submitted is None:
            return "no autograded notebook or no feedback"
        mine = set(payloads.cells_carrying(submitted, kind))
        anyones = {n for other in payloads.payloads() for n in payloads.cells_carrying(submitted, other)}
        def cell_of(item: str) -> int:  # stored_active_content's items read "cell N: what"
            return int(item.split(":")[0].removeprefix("cell "))

        stored = [item for item in payloads.stored_active_content(outcome.autograded)
                  if cell_of(item) in mine or cell_of(item) not in anyones]
        feedback = [f"feedback: {item}" for item in payloads.active_content(outcome.feedback)
                    if payloads.carries(item, kind) or not any(payloads.carries(item, k) for k in payloads.payloads())]
        found = stored + feedback
        return f"active content survived: {found[:3]}" if found else None
    return check


def _removed(kind: str):
    """Every cell that carried payload ``kind`` in the submission is listed as sanitised in the graded notebook."""
    @_expecting("every cell that carried it listed as sanitised")
    def check(outcome: Outcome) -> str | None:
        submitted = _submitted(outcome, XSS_STUDENT)
        if outcome.autograded is None or submitted is None:
            return "no autograded notebook"
        carrying = payloads.cells_carrying(submitted, kind)
        if not carrying:
            return f"the submission carries no {kind} payload"
        sanitized = outcome.autograded.metadata.get("attention_lab", {}).get("sanitized", {})
        missed = [n for n in carrying if str(n) not in sanitized]
        return f"cells {missed} carried it but were not sanitised" if missed else None
    return check


@_expecting("the learner's honest Markdown (with LaTeX) and PNG figure kept as they were")
def _honest_content_kept(outcome: Outcome) -> str | None:
    if outcome.autograded is None:
        return "no autograded notebook"
    cells = outcome.autograded.cells
    if not any(c.cell_type == "markdown" and c.source == payloads.HONEST_MARKDOWN for c in cells):
        return "the honest Markdown cell was changed"
    if not any(o.get("data", {}).get("image/png") == payloads.PNG for c in cells for o in c.get("outputs", [])):
        return "the PNG figure is gone"
    return None


@_expecting("no file but the notebook copied to autograded/ or feedback/")
def _no_extra_files(outcome: Outcome) -> str | None:
    copied = [p for folder in ("autograded", "feedback")
              for p in (outcome.course_dir / folder / student_of("extra-files") / ASSIGNMENT).glob("*")
              if p.suffix not in (".ipynb", ".html") or p.stem != NOTEBOOK.removesuffix(".ipynb")]
    return f"copied: {[p.name for p in copied]}" if copied else None


HOSTILE_ID = f"hostile-id-<img src=x onerror=\"{payloads.script('student-id', slashless=True)}\">"
BASE_EXCEPTIONS = {
    "attention_entropy": "def attention_entropy(weights):\n    raise SystemExit('bye')",
    "scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                    "    raise KeyboardInterrupt",
    "causal_mask": "class GiveUp(BaseException):\n    pass\n\ndef causal_mask(T):\n    raise GiveUp('no')",
}
LONG_ERRORS = {"causal_mask": "def causal_mask(T):\n    raise type('Y' * 100_000, (ValueError,), {})('Z' * 100_000)"}


def _write_nb(folder: Path, nb) -> None:
    nbformat.write(nb, str(folder / NOTEBOOK))


def _browser_nb(context: Context):
    """The correct solution carrying every payload kind, honest Markdown with LaTeX and a PNG figure."""
    return payloads.browser_submission(context.release_nb, solutions=context.solutions)


def release_json(edit):
    """A submission written as plain JSON (no validation: fast for huge ones): the release after ``edit(nb)``."""
    return lambda folder, context: (folder / NOTEBOOK).write_text(json.dumps(edit(nbformat.from_dict(context.release_nb))))


def with_markdown_cells(count: int):
    """An edit of the release adding ``count`` one-line Markdown cells, for :func:`release_json` only: the cells are
    plain dicts (:func:`~autograder.examples.hostile_payloads.markdown_cells`), the same JSON as notebook nodes.

    Parameters
    ----------
    count : int
        How many cells to add after the release's own.

    Returns
    -------
    callable
        ``edit(nb) -> nb``: appends the cells to ``nb.cells`` and returns ``nb``.
    """
    def edit(nb):
        nb.cells.extend(payloads.markdown_cells(count))
        return nb
    return edit


def _extra_files(folder: Path) -> None:
    (folder / "notes.html").write_text(f"<script>{payloads.script('extra-file')}</script>")
    (folder / "figure.svg").write_text(f"<svg xmlns='http://www.w3.org/2000/svg'><script>{payloads.script('svg-file')}"
                                       "</script></svg>")
    (folder / "helper.py").write_text("print('hello')\n")


def _randomly_edited(context: Context, seed: int):
    nb = fill_release(context.release_nb, context.solutions)
    payloads.random_metadata_edits(nb, seed)
    return nb


#: The one submission that carries every attack a correct notebook must survive with full marks (the cases whose
#: student this is; graded once, each checked on its own, as the xss kinds): fewer sandboxed kernels (issue 11: the
#: test suite grades the bank in every run). None of them can hide another's failure: each check asks for full
#: marks, so any attack that costs a point fails them all, and each one's own check (its note, the widget state, the
#: extra files, the feedback) reads what only it affects. Attacks that stop the kernel, cost points or must be
#: graded as their honest part stay in submissions of their own.
TOLERATED_STUDENT = "hostile-tolerated"
TOLERATED_TOO = "; in the one correct submission carrying every attack that must still get full marks"
#: each tolerated case's part of that submission: code run at the top of a solution cell, an edit of the notebook,
#: files written beside it
TOLERATED_PARTS: dict[str, dict] = {
    "reseeds-global-rng": {"prepend": ("softmax", "np.random.seed(0)\nnp.random.default_rng = lambda *a, **k: None")},
    "deleted-test-cells": {"edit": _drop_test_cells},
    "changed-kernelspec": {"edit": _bogus_kernelspec},
    "huge-output": {"prepend": ("attention_entropy", "print('x' * 50_000_000)")},
    "saved-widget-state": {"edit": _widget_state},
    "copied-solution-cell": {"edit": _duplicate_solution},
    "extra-files": {"files": _extra_files},
}


def _tolerated_submission(folder: Path, context: Context) -> None:
    """The correct solution carrying every part of :data:`TOLERATED_PARTS`."""
    cells = dict(context.solutions)
    for part in TOLERATED_PARTS.values():
        if "prepend" in part:
            cell, code = part["prepend"]
            cells[cell] = f"{code}\n{cells[cell]}"

    def edit(nb) -> None:
        for part in TOLERATED_PARTS.values():
            if "edit" in part:
                part["edit"](nb)
    _write(folder, context, cells, edit)
    for part in TOLERATED_PARTS.values():
        if "files" in part:
            part["files"](folder)


CASES: dict[str, Hostile] = {
    "infinite-loop": Hostile(
        "an infinite loop at the top of a solution cell (per-cell timeout)",
        prepend("causal_mask", "while True:\n    pass"),
        as_honest(NO_CAUSAL_MASK)),
    "loop-catching-interrupts": Hostile(
        "an infinite loop that catches KeyboardInterrupt (the per-student wall clock kills the kernel)",
        # it waits instead of spinning (as tests/test_sandbox.py's stubborn loop): the same interrupts caught in
        # vain and the same kill, without burning a core for the 20 s wall clock beside the class being graded
        prepend("causal_mask", "import threading\nwhile True:\n    try:\n        threading.Event().wait()\n"
                               "    except BaseException:\n        pass"),
        graded(BEFORE_MASK, note="wall-clock")),
    "memory-bomb": Hostile(
        "allocates 64 GiB (memory limit on the kernel)",
        prepend("causal_mask", "_bomb = bytearray(64 * 2**30)"),
        as_honest(NO_CAUSAL_MASK)),
    "growing-list": Hostile(
        "a list that grows until memory runs out",
        prepend("causal_mask", "_grow = []\nwhile True:\n    _grow.append(bytearray(2**24))"),
        as_honest(NO_CAUSAL_MASK)),
    "sys-exit": Hostile(
        "calls sys.exit()",
        prepend("causal_mask", "import sys\nsys.exit()"),
        as_honest(NO_CAUSAL_MASK)),
    "os-exit": Hostile(
        "calls os._exit(0), ending the kernel",
        prepend("causal_mask", "import os\nos._exit(0)"),
        graded(BEFORE_MASK, note="ended the kernel's process")),
    "kill-kernel": Hostile(
        "kills its own kernel with SIGKILL",
        prepend("causal_mask", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
        graded(BEFORE_MASK, note="killed (SIGKILL)")),
    "monkeypatch-numpy": Hostile(
        "a wrong softmax plus np.allclose/array_equal/testing patched to always agree",
        with_cells(lambda c: {"softmax": "np.allclose = lambda *a, **k: True\nnp.array_equal = lambda *a, **k: True\n"
                                         "np.testing.assert_allclose = lambda *a, **k: None\n" + WRONG_SOFTMAX}),
        as_honest(lambda s: {"softmax": WRONG_SOFTMAX})),
    "monkeypatch-probe": Hostile(
        "patches the imported probe's run and call_case (each probe cell imports the probe afresh)",
        with_cells(lambda c: {"softmax": "import attention_lab.core.probe\nattention_lab.core.probe.run = lambda *a, **k: None\n"
                                         "attention_lab.core.probe.call_case = lambda ns, case, *more: {'status': 'returned', "
                                         "'value': True, 'args_after': [], 'warnings': []}\n" + WRONG_SOFTMAX}),
        as_honest(lambda s: {"softmax": WRONG_SOFTMAX})),
    "hides-in-place-edit": Hostile(
        "a softmax that modifies its input in place, and a patched probe that reports no argument read back",
        with_cells(lambda c: {"softmax": HIDE_IN_PLACE + IN_PLACE_SOFTMAX}),
        as_honest(lambda s: {"softmax": IN_PLACE_SOFTMAX})),
    "replaced-probe-module": Hostile(
        "an import hook that serves its own attention_lab.core.probe, which sends nothing",
        with_cells(lambda c: {"softmax": fake_probe("def run(*args, **kwargs):\n    pass\n") + WRONG_SOFTMAX}),
        _all_of(graded(0), feedback_says("replaced the probe"))),
    "forged-results": Hostile(
        "an import hook that serves its own attention_lab.core.probe, which publishes forged 'results' claiming success",
        with_cells(lambda c: {"softmax": fake_probe(FORGED_RUN) + WRONG_SOFTMAX}),
        _all_of(graded(0), feedback_says("the probe's output was forged"))),
    "always-equal": Hostile(
        "returns an object whose __eq__ is always True",
        with_cells(lambda c: {"causal_mask": "class _Yes:\n    def __eq__(self, other):\n        return True\n"
                                             "    def __array__(self, *a, **k):\n        raise TypeError('no')\n"
                                             "def causal_mask(T):\n    return _Yes()"}),
        as_honest(lambda s: {"causal_mask": "def causal_mask(T):\n    return None"})),
    "hard-coded-self-checks": Hostile(
        "a causal_mask that returns the visible self-check's 3×3 answer whatever T is",
        with_cells(lambda c: {"causal_mask": "def causal_mask(T):\n    return np.array([[True, False, False], "
                                             "[True, True, False], [True, True, True]])"}),
        as_honest(lambda s: {"causal_mask": "def causal_mask(T):\n    return np.tril(np.ones((3, 3), dtype=bool))"})),
    "stand-in-stash-and-replay": Hostile(
        "stashes the stand-ins' answers (the reference's values for attention, asked for on attention's own "
        "hidden inputs) in a later function and replays them from attention, which it keeps being re-run",
        with_cells(lambda c: dict(STASH_AND_REPLAY)),
        _all_of(as_honest(lambda s: {"scaled_dot_product_attention": UNWRITTEN_ATTENTION}),
                _nothing_from_the_second_pass)),
    "reseeds-global-rng": Hostile(
        "a correct solution that reseeds and replaces NumPy's random generators" + TOLERATED_TOO,
        _tolerated_submission, graded(FULL), student=TOLERATED_STUDENT),
    "rebinds-np": Hostile(
        "rebinds np in the notebook namespace after defining its functions",
        with_cells(lambda c: {"attention_entropy": c.solutions["attention_entropy"] + "\nnp = None"}),
        as_honest(lambda s: {"attention_entropy": "def attention_entropy(weights):\n    raise NameError('np')"})),
    "imports-the-reference": Hostile(
        "imports the course's reference instead of writing softmax",
        with_cells(lambda c: {"softmax": "from autograder.assignments.a01_attention.reference import softmax"}),
        as_honest(lambda s: {"softmax": "# (softmax not written)"})),
    "reads-course-dir": Hostile(
        "tries to read the gradebook, the source, the config and another student's notebook, "
        "to write into the course directory and to import autograder",
        lambda folder, context: _write(folder, context, _probe_course_dir(context)),
        _sandboxed),
    "deleted-test-cells": Hostile(
        "deletes every autograder-test cell (restored from the gradebook)" + TOLERATED_TOO,
        _tolerated_submission, graded(FULL), student=TOLERATED_STUDENT),
    "deleted-answer-cell": Hostile(
        "deletes its causal_mask answer cell and the self-check after it (restored empty, never with the solution)",
        with_cells(lambda c: {}, edit=_drop_mask_cells),
        as_honest(NO_CAUSAL_MASK)),
    "edited-test-cells": Hostile(
        "replaces every autograder-test cell with 'all tests passed' and full points (restored)",
        with_cells(lambda c: {"softmax": WRONG_SOFTMAX}, edit=_edit_test_cells),
        as_honest(lambda s: {"softmax": WRONG_SOFTMAX})),
    "changed-kernelspec": Hostile(
        "changes the notebook's kernelspec to bash" + TOLERATED_TOO,
        _tolerated_submission, graded(FULL), student=TOLERATED_STUDENT),
    "huge-output": Hostile(
        "prints 50 MB" + TOLERATED_TOO,
        _tolerated_submission, _all_of(graded(FULL), _no_hidden_code_in_feedback), student=TOLERATED_STUDENT),
    "source-notebook-as-is": Hostile(
        "the instructor's source notebook handed in as it is (its hidden-test lines are replaced, not run)",
        lambda folder, context: shutil.copy(context.course_dir / "source" / ASSIGNMENT / NOTEBOOK, folder / NOTEBOOK),
        graded(FULL)),
    "saved-widget-state": Hostile(
        "a correct notebook carrying 200 kB of saved widget state (dropped before grading)" + TOLERATED_TOO,
        _tolerated_submission, _all_of(graded(FULL), _no_widget_state), student=TOLERATED_STUDENT),
    "copied-solution-cell": Hostile(
        "a copy-pasted solution cell (duplicate grade_id, as JupyterLab's duplicate makes it): the first keeps "
        "its metadata, the copy runs as a plain cell" + TOLERATED_TOO,
        _tolerated_submission, graded(FULL, note="copied cell causal_mask"), student=TOLERATED_STUDENT),
    # one submission carries every payload (one kernel, not one each: issue 11), and each kind is checked on its
    # own: the cells that carried it were sanitised, and nothing active is left in them or names its scripts
    **{f"xss-{kind}": Hostile(
        f"a correct notebook carrying every browser payload, checked for this one ({kind}: would set "
        "document.title and fetch a URL), plus honest Markdown with LaTeX and a PNG figure",
        lambda folder, context: _write_nb(folder, _browser_nb(context)),
        _all_of(graded(FULL, note="content that could run in a browser removed"), _removed(kind), _inert(kind),
                _honest_content_kept), student=XSS_STUDENT)
       for kind in payloads.payloads()},
    "hostile-student-id": Hostile(
        "a correct notebook in a folder whose name (the student id) is an HTML payload",
        lambda folder, context: _write(folder, context, {}),
        not_graded("is not a safe identifier"), student=HOSTILE_ID),
    "extra-files": Hostile(
        "a correct notebook with an HTML page, an SVG and a script beside it in the submission folder" + TOLERATED_TOO,
        _tolerated_submission, _all_of(graded(FULL, note="extra files not copied"), _no_extra_files),
        student=TOLERATED_STUDENT),
    "huge-notebook": Hostile(
        "300,000 Markdown cells (25 MB): refused on its file size before it is read",
        release_json(with_markdown_cells(300_000)),
        not_graded("over the file-size limit")),
    "too-many-cells": Hostile(
        "1,100 extra Markdown cells in a small file (over the cell limit of 1,000)",
        release_json(with_markdown_cells(1_100)),
        not_graded(f"over the cell limit: {1_100 + RELEASE_CELLS} cells, limit 1000")),
    "too-many-outputs": Hostile(
        "2,001 outputs saved in one cell (over the output limit of 2,000)",
        release_json(lambda nb: payloads.many_outputs(nb, 2_001)),
        not_graded("over the output limit: 2001 outputs, limit 2000")),
    "edited-metadata": Hostile(
        "a wrong softmax, a test cell's grade_id renamed, another's points removed, a third made ungraded, "
        "a fake manually graded cell worth 100 points and a cell with unknown nbgrader metadata",
        with_cells(lambda c: {"softmax": WRONG_SOFTMAX}, edit=payloads.listed_metadata_edits),
        _all_of(as_honest(lambda s: {"softmax": WRONG_SOFTMAX}), graded(FULL, 0, note="metadata edited: "))),
    "random-metadata-edits": Hostile(
        "random edits (seed 10) of the nbgrader metadata of every kind of cell",
        lambda folder, context: (folder / NOTEBOOK).write_text(payloads.metadata_json(_randomly_edited(context, 10))),
        _all_of(graded(FULL), graded(FULL, note="metadata edited: "))),
    "base-exceptions": Hostile(
        "functions the probe calls raise SystemExit, KeyboardInterrupt and a custom BaseException subclass",
        with_cells(lambda c: BASE_EXCEPTIONS),
        _all_of(as_honest(lambda s: BASE_EXCEPTIONS), feedback_says("your function raised SystemExit"),
                feedback_says("your function raised KeyboardInterrupt"), feedback_says("raised GiveUp"))),
    "long-error-strings": Hostile(
        "a function raising an exception with a 100,000-character class name and message",
        with_cells(lambda c: LONG_ERRORS),
        _all_of(as_honest(lambda s: LONG_ERRORS), feedback_lacks("Y" * 400, "the whole class name"),
                feedback_lacks("Z" * 400, "the whole message"))),
    "invalid-json": Hostile(
        "a notebook file that is not valid JSON",
        lambda folder, context: (folder / NOTEBOOK).write_text('{"cells": [ this is not json'),
        not_graded("is not a valid notebook")),
    "empty-file": Hostile(
        "an empty notebook file",
        lambda folder, context: (folder / NOTEBOOK).write_text(""),
        not_graded("is an empty file")),
    "missing-notebook": Hostile(
        "the notebook saved under another name",
        lambda folder, context: (folder / "scaled_dot_product_attention-Copy1.ipynb").write_text(
            json.dumps(nbformat.from_dict(context.release_nb))),
        not_graded("rename it to scaled_dot_product_attention.ipynb")),
}


def student_of(key: str) -> str:
    """The student id (submission folder) of hostile case ``key``."""
    return CASES[key].student or f"hostile-{key}"


def build(course_dir: Path, context: Context) -> list[str]:
    """Write every hostile submission into ``course_dir/submitted/<student_of(key)>/``; return the student ids."""
    students = []
    for key, case in CASES.items():
        if student_of(key) in students:  # cases sharing a submission (the xss kinds, the tolerated): built once
            continue
        folder = course_dir / "submitted" / student_of(key) / ASSIGNMENT
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        case.build(folder, context)
        students.append(student_of(key))
    return students
