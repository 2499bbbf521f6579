"""Answer formats of the questions that check understanding, and the visible check of an answer's format.

A question's answer cell sets one variable (``answer_<name> = "b"``). Its self-check tests the **format
only** — a choice letter, a number, a set — never whether the answer is right: the grader decides that
outside the learner's kernel, reading the variable through the probe (:mod:`attention_lab.core.probe`)
and comparing it there (``autograder/grader/questions.py``, which holds the answers). Both sides read an
answer with the same :meth:`read`, so "what counts as a well-formed answer" is decided once:

* :class:`Choice`: one letter, any case, spaces around it ignored (``" B "`` is ``"b"``);
* :class:`Number`: an ``int`` or ``float`` (not ``bool``, not a string), finite; compared within ``tolerance``;
* :class:`Members`: a set, frozenset, list or tuple of letters or whole numbers, in any order, duplicates
  ignored (``{3, 1}``, ``[1, 3]`` and ``(1.0, 3)`` are the same answer).

The ``repr`` of a format is the code that makes it, so a notebook's check cell and the grader's
declaration can be compared as text (``tests/test_questions.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attention_lab.core.worked import SelfCheckFailed


class AnswerFormatError(ValueError):
    """An answer that is not of its question's format; the message says what was expected, in plain words."""


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Choice:
    """A choice letter among ``letters`` (lower case in the declaration)."""

    letters: str = "abcd"

    kind = "a choice letter"

    def read(self, value) -> str:
        """The answer as one lower-case letter.

        Raises
        ------
        AnswerFormatError
            If ``value`` is not a string holding one of :attr:`letters`.
        """
        if not isinstance(value, str):
            raise AnswerFormatError(f"the answer should be one letter in quotes ({self.describe()}), "
                                    f"but it is {_what(value)}")
        letter = value.strip().lower()
        if len(letter) != 1 or letter not in self.letters:
            raise AnswerFormatError(f"the answer should be one letter ({self.describe()}), but it is {value[:40]!r}")
        return letter

    def same(self, a: str, b: str) -> bool:
        return a == b

    def show(self, answer: str) -> str:
        return f'"{answer}"'

    def describe(self) -> str:
        return ", ".join(f'"{letter}"' for letter in self.letters[:-1]) + f' or "{self.letters[-1]}"'

    def __repr__(self) -> str:
        return f'Choice("{self.letters}")'


@dataclass(frozen=True)
class Number:
    """A number, right when within ``tolerance`` (absolute) of the answer."""

    tolerance: float = 0.01

    kind = "a number with a tolerance"

    def read(self, value) -> float:
        """The answer as a float.

        Raises
        ------
        AnswerFormatError
            If ``value`` is not an int or float (a bool or a string is not a number here), or is NaN or infinite.
        """
        if not _is_number(value):
            raise AnswerFormatError(f"the answer should be a number (like 2 or 0.5, without quotes), "
                                    f"but it is {_what(value)}")
        if not math.isfinite(float(value)):
            raise AnswerFormatError(f"the answer should be a finite number, but it is {float(value)}")
        return float(value)

    def same(self, a: float, b: float) -> bool:
        return abs(a - b) <= self.tolerance + 1e-12

    def show(self, answer: float) -> str:
        return f"{answer:g}"

    def describe(self) -> str:
        return f"a number, graded to within {self.tolerance:g}"

    def __repr__(self) -> str:
        return f"Number({self.tolerance!r})"


@dataclass(frozen=True)
class Members:
    """A set in any order: of letters (``of`` a string of letters) or of whole numbers (``of`` an int: 0 … of − 1)."""

    of: str | int

    kind = "a set in any order"

    def _item(self, item):
        if isinstance(self.of, str):
            if isinstance(item, str) and len(item.strip()) == 1 and item.strip().lower() in self.of:
                return item.strip().lower()
            raise AnswerFormatError(f"each member should be one letter of {', '.join(self.of)}, but one is "
                                    f"{_what(item)}")
        if _is_number(item) and math.isfinite(float(item)) and float(item).is_integer() and 0 <= item < self.of:
            return int(item)
        raise AnswerFormatError(f"each member should be a whole number from 0 to {self.of - 1}, but one is {_what(item)}")

    def read(self, value) -> frozenset:
        """The answer as a frozenset of lower-case letters or ints.

        Raises
        ------
        AnswerFormatError
            If ``value`` is not a set, frozenset, list or tuple, or a member is not of the declared kind.
        """
        if type(value) not in (set, frozenset, list, tuple):
            raise AnswerFormatError("the answer should be a set, like {1, 3} (or a list, [1, 3]; any order; "
                                    f"set() for none), but it is {_what(value)}")
        return frozenset(self._item(item) for item in value)

    def same(self, a: frozenset, b: frozenset) -> bool:
        return a == b

    def show(self, answer: frozenset) -> str:
        items = sorted(answer)
        return "{" + ", ".join(f'"{i}"' if isinstance(i, str) else str(i) for i in items) + "}" if items else "set()"

    def describe(self) -> str:
        return (f"a set of letters of {', '.join(self.of)}" if isinstance(self.of, str)
                else f"a set of whole numbers from 0 to {self.of - 1}") + ", in any order"

    def __repr__(self) -> str:
        return f'Members("{self.of}")' if isinstance(self.of, str) else f"Members({self.of!r})"


Format = Choice | Number | Members


def _what(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, (bool, np.bool_)):
        return f"the boolean {value}"
    if _is_number(value):
        return f"the number {value}"
    return f"a {type(value).__name__}"


def check_format(namespace: dict, variable: str, answer_format: Format) -> None:
    """The visible check of a question's answer cell: is ``namespace[variable]`` of ``answer_format``?

    It checks the format only; whether the answer is right, only the grader decides.

    Parameters
    ----------
    namespace : dict
        The notebook's ``globals()``.
    variable : str
        The answer's name (``"answer_<name>"``).
    answer_format : Choice, Number or Members
        The question's answer type.

    Raises
    ------
    SelfCheckFailed
        If the variable is not set (the answer cell still raises ``NotImplementedError``) or its value is
        not of the format; the message says what is expected.
    """
    if variable not in namespace:
        raise SelfCheckFailed(f"{variable} is not answered yet: set it in the answer cell above "
                              f"({answer_format.describe()}).")
    try:
        answer = answer_format.read(namespace[variable])
    except AnswerFormatError as error:
        raise SelfCheckFailed(f"{variable}: {error}.") from None
    print(f"✓ {variable} = {answer_format.show(answer)} is {answer_format.kind}. Only the format is checked "
          "here: the autograder tests below decide whether it is right.")
