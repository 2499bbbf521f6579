"""``python -m autograder``: the course's one command line; every ``make`` target that grades or builds calls it.

Each subcommand is the ``main(argv)`` of the module that does the job, so that a module stays runnable
on its own (``python -m autograder.nbgrader.release``) and its options are documented once, there:
``python -m autograder <command> --help`` shows them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from typing import NamedTuple

# jsonschema (which nbformat imports) imports its optional IRI checker rfc3987_syntax when it is imported, and that
# compiles ~38 Lark grammars: 1-2 s of every command's start on an idle machine, 3-7 s on a busy one, a large part
# of a re-run's fixed cost (python-jsonschema/jsonschema#1428; benchmarks/grading_throughput.md). No notebook,
# nbgrader or Jupyter schema uses the "iri" formats it checks, so the command line blocks that one import (a None
# entry in sys.modules makes importing it raise ImportError, the import system's documented switch) and jsonschema
# leaves those two formats unchecked, as it does when the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)

__all__ = ["COMMANDS", "main"]


class Command(NamedTuple):
    """A subcommand: the module whose ``main(argv) -> int`` runs it, and one line for ``--help``."""

    module: str
    help: str


#: subcommand → the module that implements it (in the order ``--help`` lists them)
COMMANDS: dict[str, Command] = {
    "release": Command("autograder.nbgrader.release",
                       "regenerate release/ from source/ with nbgrader generate_assignment (make release)"),
    "grade": Command("autograder.nbgrader.grading",
                     "autograde a class: submitted/<student>/<assignment>/, one sandboxed job per student (make grade)"),
    "new-cohort": Command("autograder.nbgrader.cohorts",
                          "archive the gradebook, submissions and feedback in cohorts/<label>/ and rotate the hidden "
                          "cases' seed; --restore LABEL brings one back (make new-cohort)"),
    "class-report": Command("autograder.nbgrader.class_report",
                            "write the class report of graded assignments: HTML with PNG plots, and CSV "
                            "(make class-report)"),
    "check": Command("autograder.nbgrader.self_check",
                     "grade your own workspace/ notebooks with the hidden tests, in a private scratch course (make check)"),
    "demo": Command("autograder.examples.example_class",
                    "grade the embedded example class in a temporary course directory (make demo)"),
    "report": Command("autograder.examples.report",
                      "grade every correct variant, known mistake and hostile submission; write the report (make report)"),
    "student-env": Command("autograder.student_build",
                           "build the student edition without the grader in dist/attention-lab-student/ (make student-env)"),
    "worked-cases": Command("autograder.grader.worked_cases",
                            "regenerate the worked cases the visible self-checks show, from the specs"),
    "lite": Command("autograder.lite_build", "build the course as a static JupyterLite site in dist/lite/ (make lite)"),
    "hub": Command("autograder.hub", "set up and run JupyterHub for a class on this machine (make hub)"),
}


def parser() -> argparse.ArgumentParser:
    """The top-level parser: one subparser per :data:`COMMANDS` entry; the rest of the line goes to the command."""
    top = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    for name, command in COMMANDS.items():
        # add_help=False: ``python -m autograder release --help`` reaches the command's own parser
        commands.add_parser(name, help=command.help, description=command.help, add_help=False)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; return its exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``python -m autograder`` (default: ``sys.argv[1:]``): a command of
        :data:`COMMANDS`, then that command's own arguments.

    Returns
    -------
    int
        The command's exit status (0 on success); argparse exits with 2 on an unknown command.
    """
    options, rest = parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    command = COMMANDS[options.command]
    run = importlib.import_module(command.module).main
    program, sys.argv[0] = sys.argv[0], f"python -m autograder {options.command}"  # argparse's default prog
    try:
        return int(run(rest) or 0)
    finally:
        sys.argv[0] = program


if __name__ == "__main__":
    status = main()
    # The command is done and has closed what it wrote: the interpreter's garbage collections at exit would now
    # walk the whole heap that nbgrader's, nbconvert's and Jupyter's imports left, which the process is about to
    # give back: 0.42-0.51 s of every command's wall clock (a re-run grading one student, `make check`), 0.03-0.04 s
    # with that heap frozen (gc.freeze, as each grading job's forked process has it). Objects still alive then
    # are freed by the exit, as before; only a reference cycle's finaliser is left unrun.
    gc.freeze()
    sys.exit(status)
