"""``python -m autograder``: one command line with a subcommand per job, and the make targets call it."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys

import pytest

from autograder.__main__ import COMMANDS, main
from autograder.course import REPO

#: make target → the subcommand it must run (the issue's list, plus the two builds and the hub)
TARGETS = {"release": "release", "grade": "grade", "demo": "demo", "report": "report",
           "student-env": "student-env", "lite": "lite", "hub": "hub", "worked-cases": "worked-cases",
           "new-cohort": "new-cohort", "hub-envs": "hub envs",
           "class-report": "class-report", "check": "check"}


def test_the_issue_s_subcommands_exist():
    assert {"release", "grade", "demo", "report", "student-env", "worked-cases"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_runs_a_main_that_takes_its_arguments(name):
    run = importlib.import_module(COMMANDS[name].module).main
    assert list(inspect.signature(run).parameters) == ["argv"], f"{name}: main(argv) expected"


@pytest.mark.parametrize("target,command", sorted(TARGETS.items()))
def test_each_make_target_calls_the_cli(target, command):
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n?)+)", makefile, re.MULTILINE)
    assert recipe, f"no make target {target}"
    assert re.search(rf"-m autograder {re.escape(command)}\b", recipe.group(1)), recipe.group(1)


def test_help_lists_every_subcommand_with_its_line():
    done = subprocess.run([sys.executable, "-m", "autograder", "--help"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    for name, command in COMMANDS.items():
        assert name in done.stdout and command.help[:30] in " ".join(done.stdout.split()), name


def test_a_subcommand_s_help_is_its_own_parser_s_with_the_cli_s_name(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["release", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m autograder release") and "assignments" in out
    assert sys.argv[0] != "python -m autograder release", "argv[0] is put back"


def test_an_unknown_subcommand_is_refused_with_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["grde"])
    assert exited.value.code == 2
    assert "invalid choice: 'grde'" in capsys.readouterr().err


def python_prints(code: str) -> str:
    """What ``python -c code`` prints in the checkout, after checking that it exited with 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_arguments_after_the_subcommand_reach_it_and_the_heap_is_frozen_once_it_is_done():
    # worked-cases --check: writes nothing, exit 0 when the committed files are current (a test elsewhere keeps them so).
    # Run as `python -m autograder` runs it, with gc.freeze recorded: the command freezes the heap after its work,
    # so that the interpreter's collections at exit skip it (autograder/__main__.py: ~0.45 s of every command)
    code = ("import gc, runpy, sys\n"
            "gc.freeze = lambda: print('heap frozen', flush=True)\n"
            "sys.argv = ['autograder', 'worked-cases', '--check']\n"
            "runpy.run_module('autograder', run_name='__main__', alter_sys=True)")
    lines = python_prints(code).splitlines()
    assert "worked cases are current" in lines[-2] and lines[-1] == "heap frozen"


@pytest.mark.parametrize("name", ["release", "hub", "worked-cases", "report", "demo", "grade", "new-cohort"])
def test_each_subcommand_s_usage_names_the_cli_as_users_type_it(name, capsys):
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m autograder {name}")


def test_messages_and_generated_files_name_the_cli_not_module_paths():
    # what users read and copy: the README, the committed report, the hub's messages and templates
    texts = {path: path.read_text() for path in [REPO / "README.md", REPO / "reports" / "grader_report.md",
                                                  REPO / "autograder" / "hub" / "__init__.py",
                                                  *sorted((REPO / "hub").rglob("*.py"))]}
    stale = re.compile(r"python -m autograder\.(hub|examples\.report|examples\.example_class|nbgrader\.grading|"
                       r"nbgrader\.release|grader\.worked_cases)\b")
    assert not [str(path) for path, text in texts.items() if stale.search(text)]


def test_the_command_line_skips_jsonschema_s_slow_iri_checker_and_still_validates_notebooks():
    code = ("import sys, autograder.__main__, nbformat\n"
            "nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')]))\n"
            "try:\n    nbformat.validate({'nbformat': 4})\nexcept nbformat.ValidationError:\n    print('invalid')\n"
            "print(sys.modules['rfc3987_syntax'])")
    assert python_prints(code).split() == ["invalid", "None"]
