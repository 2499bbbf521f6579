"""How long `make test` takes, where the time goes, and what it will take at nine assignments: writes benchmarks/test_suite.md.

Runs exactly what `make test` runs (``pytest -n 3 --dist loadfile``, the whole suite, both tiers) in this
checkout, with a JUnit XML report, and sets the wall-clock time against the baseline measured in the same
run: the sum of every test's own duration (setup, call and teardown), i.e. what one worker running the
tests one after the other would take. The ratio is the speed-up the workers give (three for `make test`,
two for `make test-fast`, as the Makefile runs them). The fast tier
(``-m "not slow"``, `make test-fast`) is timed on its own after it, the same way.

Then it splits the whole run's seconds into what grows with the number of assignments and what does not
(issue 11: the 10-minute budget must hold at nine assignments):

* the tests parametrised per assignment (their id names one released assignment: its folder, its notebook,
  its ``aNN_`` package or its self-study notebook), summed per assignment;
* the end-to-end grading of each assignment's fixed sample of example students (``graded_class`` grades
  them all in one fixture, so its seconds are not per test): each assignment's sample is graded again here,
  alone, in a fresh course directory, on one worker (in the suite the fixture's two grading processes share
  the two cores with the other pytest-xdist worker);
* everything else is fixed: the hostile bank, the hub, the browser tests, the other end-to-end tests,
  and the in-process tests of each assignment's own modules (assignments 7–9 already have theirs).

The projection at N assignments is the measured serial sum plus (N − the released count) times the mean per-assignment
cost, divided by the speed-up measured in the same run. Per-module seconds are set against the file this
run replaces (the previous run).

Usage: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/test_suite.py`` (the whole suite, then the fast tier and
the samples: about 30 minutes on 2 cores; with ``BENCHMARK_JUNIT_DIR=dir`` both runs' JUnit reports are kept there;
run it on an otherwise idle machine). ``--junit FILE --note "…"`` reads the whole run from the JUnit report of a
`make test` run made elsewhere instead, e.g. a fresh clone's ``PYTEST_ADDOPTS=--junitxml=FILE CI=true bash .ci/run``
(the run the budget is about), and runs only the fast tier and the samples here.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "benchmarks" / "test_suite.md"
BUDGET_SECONDS = 600  # issue 11: `make test` at most 10 minutes on a fresh 2-core clone
TARGET_ASSIGNMENTS = 9  # issue 11: the budget must still hold at nine assignments
MODULE_ROWS = 20


@dataclass
class Run:
    """One pytest run: wall seconds, seconds per test module and per test (JUnit id), pass and fail counts."""

    wall: float
    modules: dict[str, float]
    tests: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # per module: tests/conftest.py's cpu_seconds property
    passed: int = 0
    failed: int = 0

    @property
    def serial(self) -> float:
        return sum(self.modules.values())


def read_junit(junit: Path, wall: float) -> Run:
    """Seconds (and CPU seconds, where recorded) per module and per test, and pass and fail counts, of a JUnit report."""
    result = Run(wall, defaultdict(float), cpu=defaultdict(float))
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")  # tests.test_x, or tests.test_x.TestClass
        module = ".".join(parts[:-1] if parts[-1][:1].isupper() else parts)
        seconds = float(case.get("time", 0))
        result.modules[module] += seconds
        result.tests[f"{module}::{case.get('name', '')}"] = seconds
        for prop in case.iter("property"):
            if prop.get("name") == "cpu_seconds":
                result.cpu[module] += float(prop.get("value", 0))
        if case.find("failure") is not None or case.find("error") is not None:
            result.failed += 1
        elif case.find("skipped") is None:
            result.passed += 1
    result.modules, result.cpu = dict(result.modules), dict(result.cpu)
    return result


def junit_wall(junit: Path) -> float:
    """The wall-clock seconds pytest recorded for the whole session in a JUnit report (its testsuite's time)."""
    root = ElementTree.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return float(suite.get("time"))


def run(marker: str | None, keep: Path | None = None) -> Run:
    """Run the suite (or one tier) as `make test` does, with a JUnit report (copied to ``keep`` if given)."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        # the Makefile's worker counts: three for the whole suite (its slow tests wait), two for the in-process tier
        workers = "2" if marker == "not slow" else "3"
        command = [sys.executable, "-m", "pytest", "-q", "-n", workers, "--dist", "loadfile", "--no-loadscope-reorder",
                   f"--junitxml={junit}",
                   "-p", "no:cacheprovider", *(["-m", marker] if marker else [])]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        start = time.perf_counter()
        subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        if keep is not None:  # to read which tests failed, and their own times, after the run
            shutil.copyfile(junit, keep)
        return read_junit(junit, wall)


def assignment_of(test_id: str, released: dict[str, list[str]]) -> str | None:
    """The released assignment a test's parameters name (folder, notebook, aNN_ package, self-study notebook), if one."""
    params = test_id.partition("[")[2]
    if not params:
        return None
    for name, marks in released.items():
        if any(mark in params for mark in marks):
            return name
    return None


def released_marks() -> dict[str, list[str]]:
    """Assignment id → the strings a test id that is parametrised over it contains."""
    sys.path.insert(0, str(REPO))
    from autograder import assignments

    marks = {}
    for name, assignment in assignments.all_assignments().items():
        number = name[:2]
        marks[name] = [name, assignment.notebook, *(p.name for p in (REPO / "attention_lab").glob(f"a{number}_*")),
                       *(f"notebooks/{p.name}" for p in (REPO / "notebooks").glob(f"{number}_*.ipynb"))]
    return marks


def graded_sample_seconds() -> dict[str, float]:
    """Seconds to grade each assignment's end-to-end sample alone, as the ``graded_class`` fixture grades it."""
    sys.path.insert(0, str(REPO))
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    from autograder import assignments
    from autograder.examples import example_class
    from autograder.nbgrader import grading

    seconds = {}
    for name in assignments.all_assignments():
        with tempfile.TemporaryDirectory(prefix="attention-lab-sample-") as tmp:
            start = time.perf_counter()
            students = example_class.prepare_course(Path(tmp) / "course", [name], sample=True)[name]
            # one worker: in the suite the fixture's two grading processes share the cores with the other xdist worker
            grading.grade_class(Path(tmp) / "course", name, students, workers=1)
            seconds[name] = time.perf_counter() - start
    return seconds


def previous_module_seconds() -> dict[str, float]:
    """Seconds per module in the file this run replaces (its module table), to set this run against."""
    if not OUTPUT.exists():
        return {}
    rows = re.findall(r"^\| `(tests\.[\w.]+)` \| (\d+) \|", OUTPUT.read_text(), re.M)
    return {module: float(seconds) for module, seconds in rows}


def render(whole: Run, fast: Run, samples: dict[str, float], marks: dict[str, list[str]],
           previous: dict[str, float], source: str) -> str:
    """The Markdown page; ``source`` says where the whole run's figures come from and how busy the machine was."""
    per_test: dict[str, float] = defaultdict(float)
    for test_id, seconds in whole.tests.items():
        name = assignment_of(test_id, marks)
        if name:
            per_test[name] += seconds
    released = list(marks)
    per_assignment = {name: per_test.get(name, 0.0) + samples.get(name, 0.0) for name in released}
    marginal = sum(per_assignment.values()) / len(released)
    # the fixture's grading of the samples is inside tests.test_grading's seconds: taken out with the samples' own
    fixed = whole.serial - sum(per_assignment.values())
    speed_up = whole.serial / whole.wall
    projected = {n: (whole.serial + (n - len(released)) * marginal) / speed_up
                 for n in range(len(released), TARGET_ASSIGNMENTS + 1)}
    verdict = lambda seconds, budget: "within" if seconds <= budget else "OVER"  # noqa: E731
    lines = [
        "# `make test`: wall-clock time against one worker's sum, in the same run, and at nine assignments",
        "",
        f"Generated by `benchmarks/test_suite.py` on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}. `make test` = `pytest -n 3 --dist loadfile` "
        "(both tiers); `make test-fast` = `pytest -n 2 --dist loadfile -m \"not slow\"`. The baseline is the sum of every test's own "
        "time (setup + call + teardown) from the same run's JUnit report: one worker, tests one after the other.",
        "",
        source,
        "",
        "| run | tests passed / failed | wall clock | one worker's sum (baseline) | speed-up | budget |",
        "|---|---|---|---|---|---|",
        f"| `make test` | {whole.passed} / {whole.failed} | {whole.wall / 60:.1f} min ({whole.wall:.0f} s) | "
        f"{whole.serial / 60:.1f} min | **{speed_up:.2f}×** | {verdict(whole.wall, BUDGET_SECONDS)} 10 min |",
        f"| `make test-fast` | {fast.passed} / {fast.failed} | {fast.wall:.0f} s | {fast.serial:.0f} s | "
        f"**{fast.serial / fast.wall:.2f}×** | {verdict(fast.wall, 120)} 2 min |",
        "",
        f"## At {TARGET_ASSIGNMENTS} assignments: per-assignment (marginal) and fixed cost",
        "",
        "Per released assignment: the seconds of the tests parametrised over it (their id names it), and the "
        "end-to-end grading of its fixed sample of example students (graded again alone after the suite, on one "
        "worker, as the session's `graded_class` fixture grades it while the other pytest-xdist worker runs). Fixed: everything else (the hostile bank, the hub, the "
        "browsers, the other end-to-end tests, and every assignment's own in-process modules; assignments 7–9 "
        "already have theirs).",
        "",
        "| assignment | parametrised tests | graded sample | per assignment |",
        "|---|---|---|---|",
        *(f"| `{name}` | {per_test.get(name, 0.0):.0f} s | {samples.get(name, 0.0):.0f} s | "
          f"{per_assignment[name]:.0f} s |" for name in released),
        f"| **mean (marginal cost)** | {sum(per_test.values()) / len(released):.0f} s | "
        f"{sum(samples.values()) / len(released):.0f} s | **{marginal:.0f} s** |",
        "",
        f"Fixed: {fixed:.0f} s of one worker's sum of {whole.serial:.0f} s (the sum less every assignment's cost; the "
        "graded samples' seconds are taken out of `tests.test_grading`, where the fixture spends them). "
        "Projected `make test` wall clock = (one worker's sum "
        f"+ (N − {len(released)}) × {marginal:.0f} s) / {speed_up:.2f} (this run's speed-up):",
        "",
        "| assignments | one worker's sum | projected wall clock | budget |",
        "|---|---|---|---|",
        *(f"| {n}{' (measured)' if n == len(released) else ''} | "
          f"{(whole.serial + (n - len(released)) * marginal) / 60:.1f} min | {seconds / 60:.1f} min ({seconds:.0f} s) | "
          f"{verdict(seconds, BUDGET_SECONDS)} 10 min |" for n, seconds in projected.items()),
        "",
        f"## Where the time goes (`make test`, seconds summed per test module, the {MODULE_ROWS} largest)",
        "",
        "CPU: user + system seconds of the pytest-xdist worker and of the child processes it reaped while the "
        "module's tests ran (tests/conftest.py records them per test); a sandboxed kernel that bubblewrap reaps, a "
        "server or browser still running, is not among them. Seconds far above CPU mean waiting (a wall-clock "
        "limit, a browser, a download) or uncounted children.",
        "",
        "| module | seconds | share | CPU counted | previous run |",
        "|---|---|---|---|---|",
        *(f"| `{name}` | {seconds:.0f} | {100 * seconds / whole.serial:.0f}% | "
          f"{f'{whole.cpu[name]:.0f}' if name in whole.cpu else '–'} | "
          f"{f'{previous[name]:.0f}' if name in previous else '–'} |"
          for name, seconds in sorted(whole.modules.items(), key=lambda item: -item[1])[:MODULE_ROWS]),
        "",
    ]
    return "\n".join(lines)


def loads(start: tuple[float, ...], end: tuple[float, ...]) -> str:
    """How busy the machine was, in words, from the load averages at the start and at the end."""
    text = (f"load average {' / '.join(f'{x:.1f}' for x in start)} at the start and "
            f"{' / '.join(f'{x:.1f}' for x in end)} at the end, over 1 / 5 / 15 min")
    if max(start[0], end[1]) > (os.cpu_count() or 1) + 0.5:
        return (f"**The machine was shared with other work while this ran** ({text}): other work took cores from "
                "the run, so every figure is higher than an idle fresh clone's; the ratios and the projection are "
                "made from this run's own numbers.")
    return f"The machine ran nothing else ({text})."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", type=Path, help="the JUnit report of a `make test` run to read (e.g. a fresh clone's "
                        "CI run, PYTEST_ADDOPTS=--junitxml=FILE) instead of running the whole suite here")
    parser.add_argument("--note", default="", help="where that report comes from (printed with it)")
    options = parser.parse_args(argv)
    previous = previous_module_seconds()
    marks = released_marks()
    load_start = os.getloadavg()
    # BENCHMARK_JUNIT_DIR=dir keeps both runs' JUnit reports there (whole.xml, fast.xml)
    keep = Path(os.environ["BENCHMARK_JUNIT_DIR"]) if os.environ.get("BENCHMARK_JUNIT_DIR") else None
    if options.junit:
        whole = read_junit(options.junit, junit_wall(options.junit))
        source = (f"The whole run's figures come from the JUnit report of a `make test` run"
                  f"{' ' + options.note if options.note else ''} (its wall clock is pytest's session time there); "
                  "the fast tier and the graded samples were run here afterwards.")
    else:
        whole = run(None, keep / "whole.xml" if keep else None)
        source = ""
    fast = run("not slow", keep / "fast.xml" if keep else None)
    samples = graded_sample_seconds()
    source = f"{source} {loads(load_start, os.getloadavg())}".strip()
    text = render(whole, fast, samples, marks, previous, source)
    OUTPUT.write_text(text)
    print(text)
    return 0 if not whole.failed and not fast.failed else 1


if __name__ == "__main__":
    sys.exit(main())
