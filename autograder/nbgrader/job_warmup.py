"""Load once, in the grading process, what every student's job would otherwise load for itself.

Each student is graded in a child forked from the grading process
(:class:`autograder.nbgrader.student_job.StudentJob`), so whatever a job imports, compiles or reads for the
first time it pays again for every student: measured on assignment 1, about a second of each job's CPU went
to importing IPython (the ``ipython3`` Pygments lexer the feedback highlights code with) and matplotlib (the
font list copied into each sandbox), compiling the feedback's nine Jinja templates, and compiling the
regular expressions of Pygments' lexers, mistune's plugins and nbconvert's filters. :func:`warm_jobs` does
that work once before the first fork; the children inherit it. Rendering the source notebook's feedback also
checks and renders each of the assignment's Markdown cells, which every submission repeats, once for all jobs
(:func:`autograder.nbgrader.feedback_html.markdown_html`, the sanitiser's check), and
:func:`compile_student_packages` compiles the student package that each sandboxed kernel gets with its bytecode.

What it leaves in this process is code and caches of the grader's own files — modules, compiled templates
(:data:`autograder.nbgrader.feedback_html.TEMPLATE_BYTECODE`, checked against each template's source), the
``re`` module's pattern cache, the sandbox's copy of the font list — never a kernel, a gradebook session or
anything of a student: each job still starts its own sandboxed kernel and writes its own gradebook, and a job
changes only its own copy of this memory. It starts no thread (the grading process forks). The feedback it
renders (the assignment's source notebook, with one output of each kind the feedback shows) is discarded.
:func:`warm_reference_outputs` computes the reference's output on every hidden case in the grader each job
would build, so that no job computes them again (assignment 7's T = 20 000 case cost each job 1-2 s).
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_output

#: Outputs of each kind the feedback renders (their filters compile their patterns on first use).
SAMPLE_OUTPUTS = [
    new_output("stream", name="stdout", text="printed\n"),
    new_output("execute_result", execution_count=1, data={"text/plain": "array([1., 2.])",
                                                          "text/html": "<b>shown</b>"}),
    new_output("error", ename="AssertionError", evalue="wrong",
               traceback=["\x1b[0;31mAssertionError\x1b[0m: wrong", "\x1b[1;32m----> 1\x1b[0m x"]),
]


#: The feedback exporters' template settings this process has rendered with (one warm-up each).
_rendered: set[tuple] = set()


def warm_jobs(course_dir: Path, source_dir: Path, assignment: str) -> bool:
    """Do, in this process, the first-time work every student's job repeats.

    Once per process and feedback template setting: later calls find everything loaded and return at once.

    Parameters
    ----------
    course_dir : Path
        The course root (its ``nbgrader_config.py`` configures the feedback export as in the jobs).
    source_dir : Path
        The source directory the jobs grade with (``gradebook-source/source``); the first of its
        ``<assignment>/*.ipynb`` is rendered as feedback.
    assignment : str
        The assignment id.

    Returns
    -------
    bool
        Whether it rendered a feedback page now (False: already done in this process, or no notebook).

    Raises
    ------
    Exception
        Whatever the feedback export raises on the instructor's own source notebook (the jobs would fail on it
        too); the caller decides whether that stops grading.
    """
    from autograder.nbgrader.feedback_html import accessible_html
    from autograder.nbgrader.sanitize import LANGUAGE_INFO
    from autograder.sandbox.mounts import matplotlib_font_cache

    matplotlib_font_cache()  # each sandbox gets a copy; importing matplotlib to find it costs half a second
    compile_student_packages(course_dir)
    # the comparison draws its hidden inputs from seeded generators (np.random.default_rng(seed) in each spec),
    # never from numpy's global state, so the jobs sharing the module's import changes no draw
    import numpy.random  # noqa: F401
    notebooks = sorted((Path(source_dir) / assignment).glob("*.ipynb"))
    exporter = feedback_exporter(course_dir)
    key = (type(exporter), exporter.template_name, tuple(exporter.template_paths))
    if not notebooks or key in _rendered:
        return False
    path = notebooks[0]
    nb = nbformat.read(str(path), as_version=4)  # also compiles nbformat's schema validator
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)  # as autograde stores it: highlighted as ipython3
    for cell in nb.cells:  # what GetGrades writes into the cells from the gradebook
        nbgrader = cell.metadata.get("nbgrader", {})
        if nbgrader.get("grade") or nbgrader.get("solution"):
            nbgrader.update(score=0.0, points=float(nbgrader.get("points", 0) or 0), comment=None)
    nb.cells.append(new_code_cell("print('printed')", execution_count=1, outputs=copy.deepcopy(SAMPLE_OUTPUTS)))
    # what nbgrader's converter and GetGrades put in the resources (the scores are for the template only)
    exporter.from_notebook_node(nb, resources={
        "metadata": {"path": str(path.parent)}, "unique_key": path.stem,
        "nbgrader": {"student": "warm-up", "assignment": assignment, "notebook": path.stem,
                     "score": 0.0, "max_score": 0.0, "late_penalty": 0}})
    # a page with an image (a learner's plot) is parsed again: the parser and its CSS selectors, loaded here once
    accessible_html('<div class="jp-Notebook"><img src="data:image/png;base64,"></div>')
    _rendered.add(key)
    return True


def compile_student_packages(course_dir: Path) -> int:
    """Compile, in this process, the student packages' modules that each sandbox gets with their bytecode.

    Each job's kernel gets fresh copies of the student packages with their compiled code
    (:func:`autograder.sandbox.mounts.add_bytecode`), compiled once per process and source: copying them here
    once, as a sandbox would get them, compiles them before the jobs fork (0.13 CPU-s for ``attention_lab``).
    The copy is discarded; only the compiled code stays (:func:`autograder.sandbox.mounts.compiled_module`).

    Parameters
    ----------
    course_dir : Path
        The course root (its ``nbgrader_config.py`` says which packages the kernel sees, on
        ``c.SandboxedKernelManager``).

    Returns
    -------
    int
        How many modules the copy holds (0: the kernel sees the packages where they are installed).
    """
    import tempfile

    from autograder.nbgrader.grading import course_config
    from autograder.sandbox.mounts import KernelView, package_copies

    settings = course_config(course_dir).SandboxedKernelManager
    view = KernelView(**{name: settings[name] for name in KernelView.class_trait_names() if name in settings})
    with tempfile.TemporaryDirectory(prefix="attention-lab-packages-") as scratch:
        copies = package_copies(view, Path(scratch) / "packages")
        return len(list(copies.rglob("*.py"))) if copies is not None else 0


def warm_reference_outputs(course_dir: Path, assignment: str) -> int:
    """Compute, in this process, the reference's output on every hidden case, as each job's grader would.

    The grader a job's preprocessor asks for (:func:`autograder.nbgrader.preprocessors.course_grader`, one per
    assignment, source folder and cohort seed in a process) is built here from the job's own configuration
    (:func:`autograder.nbgrader.student_job.source_config`), and each of its expected values computed, so
    that the forked jobs inherit them instead of each computing them again. The reference is trusted code
    and runs as in a job: on copies of the arrays, quietly, with its time limit, and a memory-limited case
    in a child under that limit (assignment 7's T = 20 000 case: 1-2 s of a child's CPU that every job of
    that assignment spent). The reference leaves the hidden inputs as it found them
    (tests/test_job_warmup.py checks it on every case of every assignment), so computing its outputs before
    the jobs send those inputs to the kernel changes nothing they send.

    Parameters
    ----------
    course_dir : Path
        The course root.
    assignment : str
        The assignment id.

    Returns
    -------
    int
        How many expected values the grader holds now (0: not an assignment of this course).
    """
    from autograder.nbgrader.preprocessors import course_grader
    from autograder.nbgrader.student_job import source_config

    grader = course_grader(source_config(course_dir, assignment), {"nbgrader": {"assignment": assignment}})
    if grader is None:
        return 0
    for grade_id, cases in grader.cases.items():
        for index in range(len(cases)):
            grader.expected(grade_id, index)
    return sum(len(cases) for cases in grader.cases.values())


def feedback_exporter(course_dir: Path):
    """The feedback exporter as ``generate_feedback`` builds it for ``course_dir``, with its preprocessors.

    nbgrader's ``GenerateFeedback`` configures the exporter (template, template paths) and registers its
    ``preprocessors`` on it; those that read the gradebook (``GetGrades``) are left out here.
    """
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades

    from autograder.nbgrader.grading import course_config

    config = course_config(course_dir)
    config.CourseDirectory.root = str(course_dir)
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for preprocessor in converter.preprocessors:
        if not (isinstance(preprocessor, type) and issubclass(preprocessor, GetGrades)):
            exporter.register_preprocessor(preprocessor)  # as nbgrader registers them
    return exporter
