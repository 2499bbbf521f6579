"""nbgrader preprocessors that extend Attention Lab's grading pipeline.

Each is one small configurable class, composed in ``nbgrader_config.py``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from traitlets import Bool

from attention_lab.core import values as wire
from autograder import assignments
from autograder.grader.in_process import grader_for
from autograder.nbgrader.cohorts import cohort_seed
from autograder.nbgrader.notebook_cells import nbgrader_meta
from autograder.grader.probe_output import screen, why_missing
from autograder.sandbox import AFTER_LAST_CELL, NO_CELL_TIMEOUT
from autograder.grader.stand_ins import run_passes


class ClearWidgetState(NbGraderPreprocessor):
    """Drop saved ipywidgets state from a notebook's metadata.

    ``ClearOutput`` clears cell outputs but not ``metadata.widgets``, which
    JupyterLab saves when a notebook with live widgets is stored; that state
    can hold a rendered answer (a printed reference result in an Output
    widget), so it must not reach ``release/``. (Subclassing nbgrader's base
    class makes it enabled by default, like nbgrader's own preprocessors.)
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
        return nb, resources


# ---- grading outside the learner's kernel -------------------------------------------------------

_HIDDEN_REGION = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?",
                            re.MULTILINE | re.DOTALL)
GRADED_OUTSIDE = "# (Hidden tests: graded by the course's grader outside this notebook; results below.)"


def course_grader(config, resources):
    """The assignment's :class:`~autograder.grader.comparison.Grader` for this run, or None if the notebook isn't ours.

    Parameters
    ----------
    config : traitlets.config.Config
        The run's configuration (``CourseDirectory.root``, ``CourseDirectory.source_directory``).
    resources : dict
        nbconvert's resources; ``resources["nbgrader"]["assignment"]`` names the assignment.

    Returns
    -------
    Grader or None
        One instance per assignment, source folder and cohort seed in this process
        (:func:`autograder.grader.in_process.grader_for`): the grading process calls this before it forks
        its jobs (:func:`autograder.nbgrader.job_warmup.warm_reference_outputs`), so each job finds the
        reference's outputs computed.
    """
    name = (resources.get("nbgrader") or {}).get("assignment")
    try:
        assignment = assignments.get(name)
    except KeyError:
        return None
    coursedir = CourseDirectory(config=config)
    root = Path(coursedir.root or os.getcwd())
    # the source nbgrader grades with (during `make grade`: the copy loaded into the gradebook, see
    # autograder.nbgrader.grading.load_into_gradebook), whose solution cells the known mistakes are put into
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", name))
    source_root = folder.parent.parent if folder.parent.name == "source" and folder.is_dir() else root
    return grader_for(assignment, source_root, cohort_seed(root))


def _autograder_cells(nb, grader):
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if (cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")
                and meta.get("grade_id") in grader.cases):
            yield meta["grade_id"], cell


# The probe is imported afresh from its files in every probe cell: the course's modules are taken out of
# sys.modules for that import and put back after it, so that what the notebook did to the imported
# attention_lab modules (a replaced call_case, run or wire.encode) does not reach the probe that grades it.
PROBE_LINE = ("import sys as _attention_lab_sys; _attention_lab_kept = {_n: _attention_lab_sys.modules.pop(_n) "
              "for _n in [_n for _n in _attention_lab_sys.modules if _n.split('.')[0] == 'attention_lab']}; "
              "import attention_lab.core.probe as _attention_lab_probe; "
              "_attention_lab_sys.modules.update(_attention_lab_kept); ")


def probe_source(request: dict) -> str:
    """The one line of code that runs ``request`` in the kernel (:func:`attention_lab.core.probe.run`).

    It imports a fresh copy of the probe (see :data:`PROBE_LINE`), so that patches the notebook made to
    the imported ``attention_lab`` modules do not change what the probe reports.
    """
    return f'{PROBE_LINE}_attention_lab_probe.run(globals(), "{wire.pack(request)}")'


class StandInPasses:
    """After the last cell, in the same kernel: the grader's stand-in passes (:mod:`autograder.grader.stand_ins`).

    :class:`~autograder.sandbox.SandboxedExecute` calls it with the executed notebook and a function that
    runs code in the live kernel; :class:`GradeOutsideKernel` reads :attr:`results` afterwards.
    """

    def __init__(self, grader):
        self.grader = grader
        self.results: dict[str, dict[int, dict]] = {}

    def __call__(self, nb, run_code) -> None:
        first = {grade_id: screen(self.grader.request(grade_id), cell.outputs)[0]
                 for grade_id, cell in _autograder_cells(nb, self.grader)}

        def run(request: dict) -> dict | None:
            return screen(request, run_code(probe_source(request)))[0]

        self.results = {}
        run_passes(self.grader, first, run, finals=self.results)  # a kernel that dies keeps the steps done


class InsertProbes(NbGraderPreprocessor):
    """Before execution: replace each autograder cell's hidden tests with a probe carrying its hidden inputs.

    The probe (:func:`attention_lab.core.probe.run`) runs first in the cell, so a
    failing visible check after it cannot stop it; it only calls the
    learner's functions (recording their calls of the functions of earlier
    steps) and publishes the raw results. No reference code and no expected
    value of the step enters the kernel. With ``stand_ins`` (the default) it
    also asks :class:`~autograder.sandbox.SandboxedExecute` to run the
    grader's stand-in passes after the last cell (:class:`StandInPasses`). A cell with a case whose time limit
    counts CPU time (``Case.cpu_time``) is named in ``resources[NO_CELL_TIMEOUT]``: it has no per-cell wall clock.
    """

    stand_ins = Bool(True, help="Grade each step on its own: after the last cell, run again the failed cases "
                                "that call functions of earlier steps, with the reference's values standing in "
                                "for those calls (autograder/grader/stand_ins.py). False only to measure its cost.").tag(
        config=True)

    def preprocess(self, nb, resources):
        grader = course_grader(self.config, resources)
        if grader is None:
            self.log.warning("InsertProbes: %s is not an Attention Lab assignment; left as it is",
                             (resources.get("nbgrader") or {}).get("assignment"))
            return nb, resources
        cpu_timed = set()
        for grade_id, cell in _autograder_cells(nb, grader):
            visible = _HIDDEN_REGION.sub("", cell.source).rstrip()
            request = grader.request(grade_id)
            cell.source = f"{probe_source(request)}\n{visible}"
            if any(case.get("cpu_time") for case in request["cases"]):  # a busy machine must not time it out
                cpu_timed.add(next(i for i, c in enumerate(nb.cells) if c is cell))
        resources[NO_CELL_TIMEOUT] = frozenset(cpu_timed)
        if self.stand_ins:
            resources[AFTER_LAST_CELL] = StandInPasses(grader)
        return nb, resources


class GradeOutsideKernel(NbGraderPreprocessor):
    """After execution: grade each step from its probe's results (and its stand-in passes'), in this process.

    Each autograder cell's outputs become the grader's feedback (stdout) and
    its score (the cell's value, which nbgrader reads as partial credit);
    anything the cell printed or raised in the kernel is dropped, so the
    learner's code cannot change a score by what it prints. The cell's
    source becomes its visible part again, so feedback shows no hidden
    inputs. A summary goes to ``nb.metadata["attention_lab"]["grading"]``.
    """

    def preprocess(self, nb, resources):
        grader = course_grader(self.config, resources)
        if grader is None:
            return nb, resources
        cells = dict(_autograder_cells(nb, grader))
        screened = {grade_id: screen(grader.request(grade_id), cell.outputs) for grade_id, cell in cells.items()}
        results = {grade_id: found for grade_id, (found, _) in screened.items()}
        points = {grade_id: float(nbgrader_meta(cell)["points"]) for grade_id, cell in cells.items()}
        notes = nb.metadata.setdefault("attention_lab", {})
        execution = notes.get("execution") or {}
        stopped = execution.get("reason") if execution.get("status") not in (None, "ok") else None
        passes = resources.get(AFTER_LAST_CELL)
        later = passes.results if isinstance(passes, StandInPasses) else {}
        verdicts = grader.grade(results, points, missing_reason=stopped, stand_in_results=later)
        for grade_id, cell in cells.items():
            verdict = verdicts[grade_id]
            if results[grade_id] is None:  # say why, in the cell's own terms (forged output, a replaced probe, ...)
                why = screened[grade_id][1] or why_missing(cell, stopped)
                verdict.lines = [f"  ✗ no result reached the grader ({why})"]
            visible = "\n".join(line for line in cell.source.splitlines() if not line.startswith(PROBE_LINE))
            cell.source = f"{visible.rstrip()}\n{GRADED_OUTSIDE}".lstrip("\n")
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text=verdict.text() + "\n"),
                nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(verdict.score))},
                                       execution_count=cell.get("execution_count")),
            ]
        notes["grading"] = {grade_id: {"score": v.score, "points": v.points, "named": v.named,
                                       "unanswered": v.unanswered} for grade_id, v in verdicts.items()}
        return nb, resources


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NOT_THE_NOTEBOOKS_FRAME = re.compile(r"^\s*(File\s|\[\.\.\. skipping hidden)")


def grading_machine_paths(course_root: str | os.PathLike | None = None) -> list[str]:
    """Absolute paths of the grading machine that may show in a kernel's output, longest first.

    The course directory, the repository (where ``attention_lab`` is installed from), the Python
    installation and its packages, and the home directory.
    """
    import attention_lab
    import numpy

    found = {str(Path(attention_lab.__file__).resolve().parent.parent), str(Path(numpy.__file__).resolve().parent.parent),
             sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path.home())}
    if course_root:
        found.add(str(Path(course_root).resolve()))
    return sorted((p.rstrip("/") for p in found if len(p.rstrip("/")) > 1), key=len, reverse=True)


def without_paths(text: str, paths: list[str]) -> str:
    """``text`` with each of ``paths`` (followed by ``/``) replaced by ``…/``."""
    for path in paths:
        text = text.replace(path + "/", "…/")
    return text


class CleanTracebacks(NbGraderPreprocessor):
    """After execution: tracebacks show the notebook's own cells only, and no output shows a path of this machine.

    An error output keeps its header, the frames of the notebook's cells (``Cell In[3], line 2``) and its
    message; frames of the course's package, of libraries and IPython's "skipping hidden frames" notes are
    dropped, so feedback never shows the course's code or where it is installed. Paths of the grading
    machine left in any text output (a warning printed with its file name, say) become ``…/``.
    """

    def preprocess(self, nb, resources):
        paths = grading_machine_paths(CourseDirectory(config=self.config).root or os.getcwd())
        for cell in nb.cells:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if output.get("output_type") == "error":
                    frames = output.get("traceback") or []
                    kept = [chunk for chunk in frames if not _NOT_THE_NOTEBOOKS_FRAME.match(_ANSI.sub("", chunk))]
                    output["traceback"] = [without_paths(chunk, paths) for chunk in kept]
                    output["evalue"] = without_paths(str(output.get("evalue", "")), paths)
                elif output.get("output_type") == "stream":
                    output["text"] = without_paths(output.get("text", ""), paths)
                elif "text/plain" in output.get("data", {}):
                    plain = output["data"]["text/plain"]
                    output["data"]["text/plain"] = without_paths("".join(plain) if isinstance(plain, list) else plain,
                                                                 paths)
        return nb, resources
