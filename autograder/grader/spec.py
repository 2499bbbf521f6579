"""What an assignment is, as data the grader needs: steps, hidden cases, answer variants.

An assignment's spec (``autograder/assignments/aNN_<topic>/spec.py``) builds one
:class:`Assignment`, with the helpers at the end of this module (:class:`Steps`,
:func:`functions`, :func:`combined`). The grader (:mod:`autograder.grader.comparison`) uses it in its
own process, outside the learner's kernel:

* each :class:`Step` belongs to one autograder-test cell (its ``grade_id``);
* each :class:`Case` is one call of a learner's function on hidden inputs,
  built from a seed (``Step.cases(seed)``), with a weight; only the inputs
  are sent into the kernel, and only the raw results come back
  (:mod:`attention_lab.core.probe`);
* the expected result comes from ``Assignment.reference`` in the grader;
* a wrong result is compared with the output of each known mistake
  (``Assignment.mistakes``) on the same inputs, so feedback can name it.

The variants double as test submissions: every ``correct`` variant must earn
full marks, every ``mistake`` must lose points on exactly the steps in its
``breaks`` and be named there (the report in :mod:`autograder.examples.report`).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

#: Values a case may pass to a learner's function: they cross into the kernel
#: as data (NumPy arrays without pickling, JSON scalars), never as objects.
Value = Any  # numpy.ndarray | int | float | bool | str | None | list/tuple of these


@dataclass(frozen=True)
class Variant:
    """A way of answering an assignment: solution-cell replacements.

    Attributes
    ----------
    description : str
        What the variant does differently, in words (shown to instructors).
    cells : dict of str to str
        ``grade_id`` of a solution cell → the cell's full replacement source;
        cells it does not name keep the source notebook's solution.
    breaks : frozenset of str
        For mistakes: ``grade_id`` of each autograder-test cell that must lose
        points (the step where the mistake *is*; later steps that call the
        mistaken function are graded on their own, with the reference's values
        standing in for its calls, and keep their points). Empty for correct
        variants.
    hint : str
        For mistakes: what the learner reads when their output matches this
        variant's — names the mistake and points to the idea, without code.
    """

    description: str
    cells: Mapping[str, str]
    breaks: frozenset[str] = field(default_factory=frozenset)
    hint: str = ""


@dataclass(frozen=True)
class Case:
    """One call of a learner's function on hidden inputs, compared with the reference.

    Attributes
    ----------
    description : str
        What the case checks, in words ("causal mask, T = 6").
    function : str
        Name of the learner's function in the notebook (and in ``reference``).
    args : tuple
        Positional arguments (:data:`Value` items).
    kwargs : dict
        Keyword arguments (:data:`Value` items).
    outputs : tuple of str
        Names of the returned values in messages. One name: the function
        returns one value; several: it returns a tuple of that length, in
        that order ("the output", "the weights").
    rtol, atol : float
        Tolerances for floating-point results (as in :func:`numpy.allclose`).
    raises : str, optional
        Name of the exception the function must raise on these inputs
        ("ValueError"); the case passes when it raises that class or a
        subclass, and fails when it returns.
    exact_dtype : bool
        When True, an array result must have exactly the reference's dtype
        (e.g. float16 in, float16 out), not just the same kind.
    no_warnings : bool
        When True, the case fails if the call emits any Python warning
        (e.g. NumPy's ``RuntimeWarning: invalid value``), for specs that
        require a clean result ("no NaN and no warning").
    reads : bool
        When True, the case calls nothing: it reads the notebook's variable named ``function`` (a
        question's answer, :mod:`autograder.grader.questions`); ``args`` and ``kwargs`` are empty.
    weight : float
        The case's share of the step's points: a step scores
        ``points × (weight of the cases passed) / (weight of all its cases)``.
        0 for a case that no known mistake of its step fails (e.g.
        ``causal_mask(1)``, which every mask gets right): it is still run and
        reported, but wrong code cannot earn points on it by accident.
    seconds : float, optional
        The time limit of this case's call in the learner's kernel (trusted code's calls on it in the grader
        get three times that, and at least 600 s on a memory-limited case). None: the grader's default per call
        (:data:`autograder.grader.comparison.CALL_SECONDS`), which every case used before; set it for a
        case that is large on purpose (assignment 7's memory case), never to make slow code pass.
    cpu_time : bool
        True: ``seconds`` counts the CPU time of the learner's kernel during the call, not the wall clock, so that a
        grading machine busy with other work does not make a correct answer run out of time (the wait is not
        counted); the test cell then has no per-cell wall-clock limit (``c.Execute.timeout``) of its own, only the
        notebook's (``c.SandboxedExecute.wall_clock_limit``) and the kernel's CPU limit. False: wall clock.
    memory_limit : int, optional
        Bytes of address space a call on this case may use, as the grading sandbox allows
        (``c.SandboxedKernelManager.memory_limit``). None: no limit of its own. For a case sized so that
        a wrong way of computing (forming a T × T matrix) cannot fit: in the sandbox the kernel's own
        limit applies; the grader runs trusted code on the case (known mistakes, the reference) and the
        in-process model runs answers on it in a child process under this limit
        (:mod:`autograder.grader.memory_limit`), so a mistake that exhausts the sandbox's memory gives the
        same MemoryError everywhere and never allocates its T × T matrix in the grader.
    calls_check : callable, optional
        ``calls_check(case, calls, finished) -> message or None``: what the function must do with the earlier
        course functions it calls, where the notebook asks for it (assignment 5's ``decode_incrementally``
        calls ``attend_with_cache`` once per chunk: recomputing the prefix gives the same numbers without a
        cache). ``calls`` are the deciding pass's calls in order, each a dict of ``function``, ``args`` and
        ``kwargs`` decoded, and ``returned`` when what it returned was recorded (the learner's function's value
        in the first pass, the stand-in's in a later one); ``finished`` is False when the first pass raised, so
        that ``calls`` may stop early. A right result whose calls break the rule scores nothing on the case,
        with the message.
    twin, given_twin : optional
        ``twin`` is ``(grade_id, index)`` of an earlier step's case that grades the values of the same kind of
        call (assignment 1's scores without scaling on the same Q and K). When the learner fails the twin, its
        value mistake is charged there, and this case is graded on what it is for, given the learner's own value:
        ``given_twin(case, result, twin_result, expected)`` returns None when the result is right given the
        twin's (assignment 1: the learner's own scores ÷ √d_k), a message when it is not, and ``""`` when the
        twin's result cannot be graded on (not real scores), which leaves the case's own message. One mistake,
        one charge, also for a mistake no bank entry names. A twin must not make a result that did no work pass:
        assignment 7's memory case has none (any finite result of the right shape would earn it).
    """

    description: str
    function: str
    args: tuple = ()
    kwargs: Mapping[str, Value] = field(default_factory=dict)
    outputs: tuple[str, ...] = ("the result",)
    rtol: float = 1e-4
    atol: float = 1e-6
    raises: str | None = None
    exact_dtype: bool = False
    no_warnings: bool = False
    weight: float = 1.0
    reads: bool = False
    seconds: float | None = None
    cpu_time: bool = False
    memory_limit: int | None = None
    calls_check: Callable[["Case", list, bool], str | None] | None = None
    twin: tuple[str, int] | None = None
    given_twin: Callable[["Case", Any, Any, Any], str | None] | None = None


@dataclass(frozen=True)
class Step:
    """The graded part of one autograder-test cell.

    Attributes
    ----------
    grade_id : str
        ``grade_id`` of the autograder-test cell in the source notebook.
    title : str
        Short name of the step in tables and feedback ("softmax").
    cases : callable
        ``cases(seed=<today's seed>) -> list[Case]``, called in the grader
        only: the same seed gives the same inputs, so grading is
        deterministic, and another seed gives new inputs of the same kinds
        (to rotate hidden inputs between cohorts). Without an argument it uses
        the seed the course has always used. The step's points are shared
        among its cases by their ``weight``.
    diagnose : callable, optional
        ``diagnose(case, result, expected) -> list[str]``: plain-words
        properties that fail ("rows don't sum to 1") for a wrong result that
        matches no known mistake. ``result`` is what the learner returned
        (already decoded), ``expected`` the reference's.
    question : Question, optional
        For a question that checks understanding (grade_id ``question_*``): its answer and the feedback of
        its wrong answers (:class:`autograder.grader.questions.Question`, which makes the step).
    values_graded_earlier : bool
        The step grades something other than the values an earlier step grades of the same function
        (memory, time; assignment 1's scaling of the scores): a result that equals the solution with the
        mistakes identified in the earlier steps put into it — also those of this step's own function —
        passes, so that a wrong value is charged once, in its own step. False (the default): a function's own
        earlier mistakes never excuse its result (a step that grades the same values again charges them,
        ``also_breaks``).
    """

    grade_id: str
    title: str
    cases: Callable[..., Sequence[Case]]
    diagnose: Callable[[Case, Any, Any], list[str]] | None = None
    question: Any = None
    values_graded_earlier: bool = False


@dataclass(frozen=True)
class Assignment:
    """Everything the grader knows about one assignment.

    Attributes
    ----------
    name : str
        Folder under ``source/`` and ``release/`` ("01_scaled_dot_product_attention").
    notebook : str
        The notebook's file name inside that folder.
    reference : dict of str to callable
        Function name → reference implementation (from ``autograder.assignments.a01_attention.reference*``).
    steps : tuple of Step
        In notebook order; the steps of the :attr:`questions` come last.
    correct : dict of str to Variant
        Correct but differently written answers (at least 8); each earns full marks.
    mistakes : dict of str to Variant
        Known mistakes, each with ``breaks`` and ``hint``.
    worked_cases : tuple of Case
        Small hand-worked inputs for the visible self-checks; their expected
        outputs and each mistake's outputs are stored as numbers in the
        student package (:mod:`autograder.grader.worked_cases`).
    example_students : dict of str to Variant
        The embedded example class for this assignment (student id → answer).
    questions : sequence of Question
        The questions that check understanding, in notebook order (:mod:`autograder.grader.questions`; a spec
        passes its ``QUESTIONS``). The assignment adds each one's step after :attr:`steps`, its other spellings of
        the answer to :attr:`correct` and its wrong answers to :attr:`mistakes`; afterwards this attribute is the
        tuple of every question among the steps, so that a spec may also spread them in by hand
        (``steps=(*STEPS, *QUESTIONS.steps)``, ``correct={**CORRECT, **QUESTIONS.correct}``, likewise
        ``mistakes``) and pass no ``questions``.

    Raises
    ------
    ValueError
        If a question's ``grade_id`` is already the ``grade_id`` of another step.
    """

    name: str
    notebook: str
    reference: Mapping[str, Callable]
    steps: tuple[Step, ...]
    correct: Mapping[str, Variant]
    mistakes: Mapping[str, Variant]
    worked_cases: tuple[Case, ...] = ()
    example_students: Mapping[str, Variant] = field(default_factory=dict)
    questions: Sequence[Any] = ()

    def __post_init__(self):
        steps, correct, mistakes = tuple(self.steps), dict(self.correct), dict(self.mistakes)
        for question in self.questions:
            taken = next((step for step in steps if step.grade_id == question.grade_id), None)
            if taken is not None and taken.question is question:
                continue  # handed in again (dataclasses.replace): its step and variants are in already
            if taken is not None:
                raise ValueError(f"assignment {self.name}: question {question.name!r} has the grade_id of another "
                                 f"step, {question.grade_id!r}")
            question_correct, question_mistakes = question.variants()
            steps += (question.step(),)
            correct.update(question_correct)
            mistakes.update(question_mistakes)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "correct", correct)
        object.__setattr__(self, "mistakes", mistakes)
        object.__setattr__(self, "questions", tuple(step.question for step in steps if step.question is not None))

    @classmethod
    def in_folder(cls, folder: Path | str, *, more_students: Mapping[str, Variant] | None = None,
                  **fields: Any) -> "Assignment":
        """The assignment whose spec lives in ``folder``, with the data files beside it.

        Its questions are read from ``folder/questions.toml`` (:meth:`autograder.grader.questions.Questions.load`)
        and its example class from ``folder/example_students.toml`` (:func:`example_students`, naming any answer
        of the bank or of the questions), followed by ``more_students`` (students with cells of their own).

        Parameters
        ----------
        folder : Path or str
            The assignment's folder (``autograder/assignments/aNN_name/``).
        more_students : mapping of str to Variant, optional
            Example students written in the spec, graded after those of the file.
        **fields
            The other attributes (``name``, ``notebook``, ``reference``, ``steps``, ``correct``, ``mistakes``,
            ``worked_cases``).

        Raises
        ------
        autograder.grader.questions.QuestionsFileError, ExampleStudentsFileError
            If a data file is malformed (one line naming the file and the entry).
        ValueError
            As :class:`Assignment`.
        """
        from autograder.grader.questions import Questions  # that module builds on this one

        folder = Path(folder)
        assignment = cls(questions=Questions.load(folder / "questions.toml"), **fields)
        students = example_students(folder / "example_students.toml", {**assignment.correct, **assignment.mistakes})
        return dataclasses.replace(assignment, example_students={**students, **(more_students or {})})

    @property
    def function_mistakes(self) -> dict[str, Variant]:
        """The known mistakes of the steps that grade functions: :attr:`mistakes` without the questions' wrong answers."""
        asked = {question.grade_id for question in self.questions}
        return {key: variant for key, variant in self.mistakes.items() if not variant.breaks & asked}

    def step(self, grade_id: str) -> Step:
        """The step of the autograder cell ``grade_id``.

        Raises
        ------
        KeyError
            If no step has that ``grade_id``.
        """
        for step in self.steps:
            if step.grade_id == grade_id:
                return step
        raise KeyError(f"assignment {self.name} has no step for grade_id {grade_id!r}")


# ---- how a spec builds its parts -----------------------------------------------------------------

class Steps(list):
    """An assignment's steps in notebook order, each declared on the function that builds its hidden cases.

    A spec makes ``STEPS = Steps()``, puts ``@STEPS.add(grade_id, title, diagnose)`` above each
    ``cases(seed=…)`` builder in the order of the notebook's autograder-test cells, and passes
    ``steps=STEPS`` to :class:`Assignment` (which keeps them as a tuple). The builder is kept as it is (it is ``Step.cases``).
    """

    def add(self, grade_id: str, title: str, diagnose: Callable[[Case, Any, Any], list[str]] | None = None, *,
            values_graded_earlier: bool = False):
        """Declare the step graded in the autograder-test cell ``grade_id`` (see :class:`Step`)."""
        def declare(cases: Callable[..., Sequence[Case]]) -> Callable[..., Sequence[Case]]:
            self.append(Step(grade_id, title, cases, diagnose, values_graded_earlier=values_graded_earlier))
            return cases
        return declare


def functions(module, names: str) -> dict[str, Callable]:
    """``name → module.name`` for each of the space-separated ``names``: reference functions of an assignment.

    Raises
    ------
    AttributeError
        If ``module`` defines no function of one of those names.
    """
    return {name: getattr(module, name) for name in names.split()}


def combined(description: str, *variants: Variant) -> Variant:
    """One answer made of several variants: their cells (later ones win), the steps they break and their hints."""
    cells, breaks = {}, frozenset()
    for variant in variants:
        cells.update(variant.cells)
        breaks |= variant.breaks
    return Variant(description, cells, breaks, " / ".join(v.hint for v in variants if v.hint))


class ExampleStudentsFileError(ValueError):
    """An ``example_students.toml`` that does not name its students' answers as :func:`example_students` says."""


def example_students(path: Path | str, answers: Mapping[str, Variant]) -> dict[str, Variant]:
    """An assignment's example class (``make demo``, ``make report``, the end-to-end sample), read from ``path``.

    The file is data: one TOML table per student, in the order the class is graded (the end-to-end sample takes
    the first student of each kind, README "Adding an assignment"), naming answers of the answer bank::

        [dan-mask-flipped]                 # the student's id (its folder under submitted/)
        answers = ["mask_flipped"]         # one known mistake or correct variant: that answer as it is

        [ivy-two-mistakes]
        description = "a tile skipped …, and the shorter last key block dropped"
        answers = ["skip_by_first_query", "last_key_block_dropped"]   # several: :func:`combined`

    Students whose answer is written for them alone (cells of their own) stay in the spec, as a :class:`Variant` each.

    Parameters
    ----------
    path : Path or str
        The ``example_students.toml`` (UTF-8).
    answers : mapping of str to Variant
        The answers a student may name: the bank's correct variants and known mistakes and the questions' (keys
        as in ``bank.py`` and :class:`autograder.grader.questions.Questions`).

    Returns
    -------
    dict of str to Variant
        Student id → answer, in the file's order.

    Raises
    ------
    ExampleStudentsFileError
        If the file is not TOML, a student has keys other than ``answers`` and ``description``, names no answer or
        one ``answers`` does not hold, or combines several without a description.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ExampleStudentsFileError(f"{path}: not valid TOML: {error}") from error
    students = {}
    for student, table in data.items():
        where = f"{path.name}, student {student}"
        names = table.get("answers") if isinstance(table, dict) else None
        if not isinstance(table, dict) or set(table) - {"answers", "description"} or not names:
            raise ExampleStudentsFileError(f"{where}: a student is a table with answers = [one or more keys of the "
                                           f"answer bank] and, for several, a description; got {table!r}"[:300])
        unknown = [name for name in names if name not in answers]
        if unknown:
            raise ExampleStudentsFileError(f"{where}: {', '.join(map(repr, unknown))} is not a correct variant or "
                                           "known mistake of this assignment's bank or questions")
        if len(names) == 1 and "description" not in table:
            students[student] = answers[names[0]]
        elif "description" not in table:
            raise ExampleStudentsFileError(f"{where}: a student of several answers needs a description")
        else:
            students[student] = combined(table["description"], *(answers[name] for name in names))
    return students
