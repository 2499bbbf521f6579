"""One mistake, one charge: grade each step on its own, with stand-ins for the earlier functions it calls.

A later function that calls an earlier course function (``attention`` calls
``softmax``) fails its hidden cases when that earlier function is wrong,
raises, is unfinished, or returns the wrong shape or dtype, although the
mistake is in the earlier step, which is charged for it already. So, after the
first pass (the notebook's own run, in which the probe recorded the arguments
of every call the graded function made to an earlier function, see
:mod:`attention_lab.core.probe`):

1. for each step, in notebook order, the cases that failed and called an
   earlier function are run again in the same kernel, with each earlier
   function replaced by a **stand-in** that returns the reference's value for
   exactly the recorded arguments (computed here, in the grader; the
   reference's code never enters the kernel);
2. a stand-in called with arguments it has no value for (they depend on an
   earlier stand-in's answer: ``attend_with_cache`` fed its own new cache)
   records them and stops the case; the grader computes their values and runs
   the case again — one pass per level of the call chain, at most
   :data:`MAX_PASSES` per case, or :data:`MAX_CHAIN_PASSES` while every pass
   advances the chain (it made again, and was answered for, the calls the pass
   before it asked about);
3. the record of the pass in which every call was answered is the step's own
   result; :meth:`autograder.grader.comparison.Grader.grade` checks it like any other.

Steps are done one after the other, and a function is stood in for only in
steps after the last one that grades it (``Grader.earlier``), so a stand-in's
values — the reference's outputs of earlier functions — are never in the kernel
while a case of that function is still being graded: a submission that stashes
them can replay them only where they are the honest answer anyway.

The same function drives the sandboxed kernel (``autograder.nbgrader.preprocessors``),
the in-process model (``autograder.grader.in_process``) and the instructor's
in-notebook grading (``autograder.grader.in_notebook``): each passes a ``run``
callable that sends one request to its kernel and returns the results.
"""

from __future__ import annotations

from typing import Callable, Mapping

from autograder.grader.comparison import TRAIL, Grader

#: Later passes per step for any case: one per level of the call chain (a chain of calls fed by earlier
#: stand-ins' answers, e.g. decoding a 9-token sequence one token at a time needs 9).
MAX_PASSES = 16
#: Later passes for a case that keeps making progress: each pass made again, and was answered for, every call the
#: pass before it asked about, so the chain advanced by a level (assignment 9's generate written sublayer by
#: sublayer with mlp unfinished needs 37). A case whose calls never repeat (the hostile bank's stash-and-replay
#: submission: a fresh call every pass) makes no progress and stops at MAX_PASSES, within the notebook's wall
#: clock; 128 passes for every case overran it.
MAX_CHAIN_PASSES = 128

Run = Callable[[dict], "dict | None"]


def run_passes(grader: Grader, first: Mapping[str, dict | None], run: Run,
               grade_ids=None, finals: dict | None = None) -> dict[str, dict[int, dict]]:
    """The stand-in passes for every step (or ``grade_ids``), in notebook order.

    Parameters
    ----------
    grader : Grader
        The assignment's grader (it computes the stand-ins' values with the reference).
    first : dict
        grade_id → the kernel's first-pass results for that step (or None).
    run : callable
        ``run(request) -> results | None``: the kernel's results for a request of
        :meth:`Grader.request` (None when none arrived, e.g. the kernel died).
    grade_ids : iterable of str, optional
        Only these steps.
    finals : dict, optional
        Where to put the results, step by step (so that the steps done before ``run`` raised are kept).

    Returns
    -------
    dict
        grade_id → {case index → the record of its pass with every earlier call answered}; a case
        that passed in the first pass, called no earlier function, or did not settle is absent.
    """
    wanted = set(first if grade_ids is None else grade_ids)
    finals = {} if finals is None else finals
    for step in grader.assignment.steps:
        if step.grade_id in wanted and grader.earlier[step.grade_id]:
            finals[step.grade_id] = step_passes(grader, step.grade_id, first.get(step.grade_id), run)
    return finals


def step_passes(grader: Grader, grade_id: str, first: dict | None, run: Run) -> dict[int, dict]:
    """The stand-in passes of one step (see :func:`run_passes`)."""
    records = first.get("results") if isinstance(first, dict) else None
    if not isinstance(records, list) or len(records) != len(grader.cases[grade_id]):
        return {}
    pending = {index: record["calls"] for index, record in enumerate(records)
               if _needs_another_pass(record) and not grader.passes(grade_id, index, record)}
    values: dict[str, dict] = {}
    finals: dict[int, dict] = {}
    seen: dict[str, dict] = {}  # digest → a recorded call, to read the final pass's "answered" digests back
    asked: dict[int, set[str]] = {}  # case → the digests of the calls its last pass had no value for
    advanced: set[int] = set()  # the cases whose last pass was answered for every call the pass before asked about
    for number in range(MAX_CHAIN_PASSES):
        for index, calls in list(pending.items()):
            if number >= MAX_PASSES and index not in advanced:
                del pending[index]  # past the bound without progress: the first pass's result stands
                continue
            answers = [grader.stand_in(grade_id, call) for call in calls]
            values.update(answer for answer in answers if answer is not None)
            seen.update((answer[0], call) for call, answer in zip(calls, answers) if answer is not None)
            asked[index] = {answer[0] for answer in answers if answer is not None}
            if number > 0 and None in answers:
                # the stand-in pass itself made a call no stand-in may answer: the first pass's result stands.
                # (In the first pass such a call can depend on a wrong earlier result and not come again.)
                del pending[index]
        if not pending:
            break
        indices = sorted(pending)
        results = run(grader.request(grade_id, indices, stand_ins=values))
        got = results.get("results") if isinstance(results, dict) else None
        if not isinstance(got, list) or len(got) != len(indices):
            break
        for index, record in zip(indices, got):
            if not isinstance(record, dict) or record.get("index") != index:
                del pending[index]
            elif _needs_another_pass(record):
                pending[index] = record["calls"]
                answered = record.get("answered")
                if isinstance(answered, list) and asked[index] <= set(answered):
                    advanced.add(index)
                else:
                    advanced.discard(index)
            elif record.get("calls") or record.get("calls_dropped") or record.get("status") == "incomplete":
                del pending[index]  # stopped without saying which call had no value
            else:
                finals[index] = {**record, TRAIL: _trail(record, seen, values)}
                del pending[index]
    return finals


def _trail(record: dict, seen: Mapping[str, dict], values: Mapping[str, dict]) -> list[dict] | None:
    """The calls of earlier functions the final pass made, in order, each with what its stand-in answered
    (``"returned"``, or no such key when it raised), for a case's rule on its calls
    (:attr:`~autograder.grader.spec.Case.calls_check`); None when they cannot all be named (over the probe's
    recording limit)."""
    answered = record.get("answered")
    if not isinstance(answered, list) or record.get("answered_dropped") or \
            not all(d in seen and d in values for d in answered):
        return None
    trail = []
    for digest in answered:
        call = {key: value for key, value in seen[digest].items() if key not in ("returned", "raised")}
        trail.append({**call, "returned": values[digest]["value"]} if "value" in values[digest] else call)
    return trail


def _needs_another_pass(record) -> bool:
    """Whether a record lists calls of earlier functions (all of them recorded) that stand-ins could answer."""
    return (isinstance(record, dict) and isinstance(record.get("calls"), list) and bool(record["calls"])
            and not record.get("calls_dropped"))
