"""Questions that check understanding: declared in a spec in a few lines, graded by the same grader as the steps.

A question is three cells of the source notebook (README, "Adding a question"):

* the answer cell, a solution cell of grade_id ``answer_<name>`` that sets the variable ``answer_<name>``;
* its visible check ``check_<name>``: :func:`attention_lab.core.questions.check_format`, the format only;
* the autograder-test cell ``question_<name>`` (its points in nbgrader's metadata), whose hidden part is the
  same ``grade_step`` line as a step's.

In the grader a question is a :class:`~autograder.grader.spec.Step` with one :class:`~autograder.grader.spec.Case`
that *reads* the variable instead of calling a function (``Case.reads``): the probe sends its value out of the
kernel as data, and :class:`~autograder.grader.comparison.Grader` compares it here with :attr:`Question.answer`
(read with the format's own :meth:`read`, so ``" B "``, ``{3, 1}`` and ``2.0`` count as ``"b"``, ``[1, 3]``
and ``2``). A wrong answer listed in :attr:`Question.wrong` is named, with the misconception it shows; each
is also a known mistake of the assignment (:attr:`Questions.mistakes`), and each other way of writing the
answer a correct variant (:attr:`Questions.correct`), so the answer bank, the tests and ``make report``
count them like the steps' mistakes and variants. The answers live here, in ``autograder/``, never in the
student package or ``release/``.

An assignment's questions are course content, not code: they are written in ``questions.toml`` next to its
``spec.py`` (one ``[[question]]`` table each, in notebook order; :meth:`Questions.load` reads it), and the spec hands
them to its :class:`Assignment`, which adds their steps, correct variants and known mistakes to its own::

    QUESTIONS = Questions.load(Path(__file__).with_name("questions.toml"))
    ASSIGNMENT = Assignment(..., steps=STEPS, questions=QUESTIONS, correct=CORRECT, mistakes=MISTAKES)

A question in ``questions.toml``::

    [[question]]
    name = "nan_rows"              # the cells answer_nan_rows, check_nan_rows, question_nan_rows
    title = "NaN rows"
    format = "members"             # "choice" (with letters = "abcd"), "number" (tolerance = 0.01) or "members"
    of = 4                         # members: whole numbers 0 … of − 1, or a string of letters
    answer = [0, 2]                # a set is written as an array
    also_correct = ["[2, 0]"]      # other ways of writing it, as the code after ``answer_nan_rows =``

    [[question.wrong]]             # one table per typical wrong answer
    answer = [0]
    why = "the misconception it shows (the learner reads it)"

(:meth:`Questions.add` declares one in Python, for tests and tools.)

Their wrong answers are on the list of mistakes only hidden inputs expose
(:func:`autograder.grader.bank.hidden_inputs_only`) because they are questions. (A spec may also spread them in by
hand, ``steps=(*STEPS, *QUESTIONS.steps)``, ``correct={**CORRECT, **QUESTIONS.correct}``, likewise ``mistakes``,
and add ``QUESTIONS.hidden_inputs_only(NAME)`` to :data:`~autograder.grader.bank.HIDDEN_INPUTS_ONLY`: the same
assignment.)
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Mapping

from attention_lab.core.questions import Choice, Format, Members, Number
from autograder.grader.spec import Case, Step, Variant

__all__ = ["Question", "Questions", "Choice", "Number", "Members", "QUESTION_REASON", "QuestionsFileError"]

#: why a question's wrong answers are among the mistakes only hidden inputs expose (README's words)
QUESTION_REASON = ("a question's visible check tests only the format of the answer (a letter, a number, a set): "
                   "which answer is right only the grader knows, outside the learner's kernel")


def _code(value) -> str:
    """The Python text that writes an answer in an answer cell (``"b"``, ``2.5``, ``{1, 3}``, ``set()``)."""
    if isinstance(value, (set, frozenset)):
        items = sorted(value)
        return "{" + ", ".join(repr(i) for i in items) + "}" if items else "set()"
    return repr(value)


def _slug(value) -> str:
    if isinstance(value, (set, frozenset)):
        return "_".join(str(i) for i in sorted(value)) or "none"
    return str(value).replace(".", "p").replace("-", "minus")


@dataclass(frozen=True)
class Question:
    """One autograded question (see the module docstring).

    Attributes
    ----------
    name : str
        ``[a-z0-9_]+``; the variable is ``answer_<name>``, the cells ``answer_<name>``, ``check_<name>``,
        ``question_<name>``.
    title : str
        Short name in tables and feedback ("NaN rows").
    format : Choice, Number or Members
        The answer type the notebook names.
    answer : object
        The right answer, in the format (read with ``format.read``).
    wrong : dict
        A typical wrong answer → the misconception it shows, in one or two sentences that do not give the
        answer away (the learner reads it). For a :class:`Choice`, every other letter must be here.
    also_correct : tuple of str
        Other ways of writing the right answer, as the code after ``answer_<name> =`` (``'" B "'``, ``"[3, 1]"``,
        ``"2.0"``): each becomes a correct variant that must earn the points.
    otherwise : str
        What a wrong answer not in ``wrong`` reads, after "not right".
    """

    name: str
    title: str
    format: Format
    answer: Any
    wrong: Mapping[Any, str] = field(default_factory=dict)
    also_correct: tuple[str, ...] = ()
    otherwise: str = ""

    def __post_init__(self):
        right = self.format.read(self.answer)  # raises AnswerFormatError for a declaration of the wrong format
        object.__setattr__(self, "answer", right)
        wrong = {}
        for value, why in self.wrong.items():
            read = self.format.read(set(value) if isinstance(value, frozenset) else value)
            if self.format.same(read, right):
                raise ValueError(f"question {self.name}: the wrong answer {value!r} is the right one")
            if not why.strip():
                raise ValueError(f"question {self.name}: say which misconception {value!r} shows")
            wrong[read] = why
        object.__setattr__(self, "wrong", wrong)
        if isinstance(self.format, Choice):
            unexplained = set(self.format.letters) - {right} - set(wrong)
            if unexplained:
                raise ValueError(f"question {self.name}: every wrong choice needs its feedback; "
                                 f"missing {sorted(unexplained)}")
        for code in self.also_correct:
            if not self.format.same(self.format.read(ast.literal_eval(code)), right):
                raise ValueError(f"question {self.name}: {code} is not another way of writing the answer")

    @property
    def grade_id(self) -> str:
        """The autograder-test cell."""
        return f"question_{self.name}"

    @property
    def variable(self) -> str:
        """The variable the answer cell sets (also the answer cell's grade_id)."""
        return f"answer_{self.name}"

    def mistake_key(self, answer) -> str:
        """The key of the known mistake of answering ``answer`` (read), as :attr:`Questions.mistakes` names it."""
        return f"{self.grade_id}_{_slug(answer)}"

    def feedback(self, answer) -> tuple[str | None, str]:
        """(mistake key or None, what the learner reads) for a wrong ``answer`` (read with the format)."""
        for wrong, why in self.wrong.items():
            if self.format.same(answer, wrong):
                return self.mistake_key(wrong), why
        return None, self.otherwise

    def is_right(self, answer) -> bool:
        return self.format.same(answer, self.answer)

    def step(self) -> Step:
        """The grader's step: one case reading :attr:`variable` (weight 1)."""
        case = Case(f"{self.variable} ({self.format.kind})", self.variable, outputs=("the answer",), reads=True)
        return Step(self.grade_id, self.title, lambda seed=None: [case], question=self)

    def variants(self) -> tuple[dict[str, Variant], dict[str, Variant]]:
        """(correct variants, known mistakes) of this question, keyed as in the answer bank."""
        correct = {f"{self.grade_id}_written_{i}": Variant(f"{self.title}: the answer written as {code}",
                                                            {self.variable: f"{self.variable} = {code}\n"})
                   for i, code in enumerate(self.also_correct, 1)}
        mistakes = {self.mistake_key(wrong): Variant(f"{self.title}: answers {self.format.show(wrong)}",
                                                     {self.variable: f"{self.variable} = {_code(wrong)}\n"},
                                                     frozenset({self.grade_id}), why)
                    for wrong, why in self.wrong.items()}
        return correct, mistakes


class QuestionsFileError(ValueError):
    """A ``questions.toml`` that does not declare its questions as the module docstring says."""


#: a question table's keys, and the keys each answer format takes
_KEYS = {"name", "title", "format", "answer", "wrong", "also_correct", "otherwise"}
_FORMATS = {"choice": ("letters", Choice), "number": ("tolerance", Number), "members": ("of", Members)}


def _from_toml(value):
    """An answer as TOML writes it (an array for a set) → as :class:`Question` takes it."""
    return set(value) if isinstance(value, list) else value


def _question(table: dict, where: str) -> Question:
    """One ``[[question]]`` table → :class:`Question` (raises :class:`QuestionsFileError` naming ``where``)."""
    kind = table.get("format")
    if kind not in _FORMATS:
        raise QuestionsFileError(f"{where}: format must be one of {', '.join(map(repr, _FORMATS))}, got {kind!r}")
    parameter, make = _FORMATS[kind]
    unknown = set(table) - _KEYS - {parameter}
    missing = {"name", "title", "answer", parameter} - set(table)
    if unknown or missing:
        problems = "; ".join(f"{what} {sorted(keys)}" for what, keys in (("unknown", unknown), ("missing", missing))
                             if keys)
        raise QuestionsFileError(f"{where}: a {kind} question has the keys name, title, format, {parameter}, answer, "
                                 f"wrong, also_correct, otherwise: {problems}")
    wrong = {}
    for entry in table.get("wrong", []):
        if set(entry) != {"answer", "why"}:
            raise QuestionsFileError(f"{where}: each [[question.wrong]] has exactly the keys answer and why, "
                                     f"got {sorted(entry)}")
        answer = _from_toml(entry["answer"])
        wrong[frozenset(answer) if isinstance(answer, set) else answer] = entry["why"]
    try:
        return Question(table["name"], table["title"], make(table[parameter]), _from_toml(table["answer"]), wrong,
                        tuple(table.get("also_correct", ())), table.get("otherwise", ""))
    except ValueError as error:
        raise QuestionsFileError(f"{where}: {error}") from error


class Questions(list):
    """An assignment's questions in notebook order, read from its ``questions.toml`` (see the module docstring)."""

    @classmethod
    def load(cls, path: Path | str) -> "Questions":
        """Read the questions of ``path`` (a ``questions.toml``; the module docstring shows its form).

        Parameters
        ----------
        path : Path or str
            The file, UTF-8 TOML: an array of ``[[question]]`` tables, in notebook order.

        Returns
        -------
        Questions
            One :class:`Question` per table, in the file's order.

        Raises
        ------
        QuestionsFileError
            If the file is not TOML, a table has an unknown or missing key, an unknown format, a wrong answer that
            is the right one, a choice letter without its feedback, or an ``also_correct`` that is not the answer.
        FileNotFoundError
            If ``path`` does not exist.
        """
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise QuestionsFileError(f"{path}: not valid TOML: {error}") from error
        if set(data) - {"question"}:
            raise QuestionsFileError(f"{path}: only [[question]] tables belong here, got {sorted(set(data))}")
        questions = cls()
        for number, table in enumerate(data.get("question", []), 1):
            questions.append(_question(table, f"{path.name}, question {number}"))
        return questions

    def add(self, name: str, title: str, format: Format, answer, wrong: Mapping[Any, str], also_correct=(),
            otherwise: str = "") -> Question:
        """Declare one question (the arguments are :class:`Question`'s attributes)."""
        question = Question(name, title, format, answer, wrong, tuple(also_correct), otherwise)
        self.append(question)
        return question

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(question.step() for question in self)

    @property
    def correct(self) -> dict[str, Variant]:
        return {key: variant for question in self for key, variant in question.variants()[0].items()}

    @property
    def mistakes(self) -> dict[str, Variant]:
        return {key: variant for question in self for key, variant in question.variants()[1].items()}

    def hidden_inputs_only(self, assignment: str) -> dict[tuple[str, str, str], str]:
        """(assignment, mistake key, grade_id) → :data:`QUESTION_REASON` for these questions' wrong answers.

        The entries of :func:`autograder.grader.bank.hidden_inputs_only` for them.
        """
        return {(assignment, key, question.grade_id): QUESTION_REASON
                for question in self for key in question.variants()[1]}
