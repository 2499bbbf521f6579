"""The grading process warms up what every student's job needs before it forks them (autograder/nbgrader/job_warmup.py).

In-process, no kernel: the feedback templates' bytecode cache (a hit renders as a compiled template does, a
changed template is compiled again, other compile settings never share an entry), a job forked after the
warm-up imports and compiles nothing more to write a feedback page, nor renders or checks the warmed notebook's
Markdown again (a subprocess stands for the grading process), a Markdown cell's kept HTML and sanitiser check
are a fresh rendering's, the sandbox's package copies carry bytecode the kernel's Python loads (and never a stale
one), and a warm-up that fails never stops grading. That the warm-up changes no grade and no feedback
byte is benchmarks/student_job_cost.py's check on the end-to-end sample; tests/test_grading.py grades with it.
"""

import json
import shutil
import subprocess
import sys

import jinja2
import nbformat
import pytest

from autograder.nbgrader import feedback_html, grading, job_warmup, sanitize
from conftest import ASSIGNMENT, REPO


class CountingEnvironment(jinja2.Environment):
    """Jinja's environment, counting the templates it compiles from source."""

    compiled = 0

    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
        if not raw:
            CountingEnvironment.compiled += 1
        return super().compile(source, name, filename, raw, defer_init)


def environment(templates: dict, cache, **options) -> CountingEnvironment:
    return CountingEnvironment(loader=jinja2.DictLoader(templates), bytecode_cache=cache, **options)


def test_a_cached_template_renders_as_a_compiled_one_and_a_changed_one_is_compiled_again(monkeypatch):
    monkeypatch.setattr(CountingEnvironment, "compiled", 0)
    cache = feedback_html.TemplateBytecode()
    templates = {"page.j2": "{% for x in items %}<li>{{ x | upper }}</li>{% endfor %}"}
    first = environment(templates, cache).get_template("page.j2").render(items=["q", "k"])
    assert first == "<li>Q</li><li>K</li>" and CountingEnvironment.compiled == 1 and len(cache.entries) == 1
    again = environment(templates, cache).get_template("page.j2").render(items=["q", "k"])  # a new exporter's
    assert again == first and CountingEnvironment.compiled == 1  # from the cache: not compiled again
    changed = environment({"page.j2": "<p>{{ items | join(',') }}</p>"}, cache).get_template("page.j2")
    assert changed.render(items=["q", "k"]) == "<p>q,k</p>" and CountingEnvironment.compiled == 2


def test_environments_with_other_compile_settings_never_share_a_cached_template(monkeypatch):
    monkeypatch.setattr(CountingEnvironment, "compiled", 0)
    cache = feedback_html.TemplateBytecode()
    templates = {"page.j2": "<% if on %>on<% endif %>{% if on %}braces{% endif %}"}
    assert environment(templates, cache).get_template("page.j2").render(on=True) == "<% if on %>on<% endif %>braces"
    angled = environment(templates, cache, block_start_string="<%", block_end_string="%>")
    assert angled.get_template("page.j2").render(on=True) == "on{% if on %}braces{% endif %}"
    assert CountingEnvironment.compiled == 2 and len(cache.entries) == 2


def test_every_feedback_exporter_keeps_its_compiled_templates_in_the_shared_cache():
    assert feedback_html.FeedbackExporter().environment.bytecode_cache is feedback_html.TEMPLATE_BYTECODE
    exporter = job_warmup.feedback_exporter(REPO)
    assert isinstance(exporter, feedback_html.FeedbackExporter) and exporter.template_name == "feedback"


# In a fresh interpreter standing for the grading process: optionally the warm-up (on a source folder holding
# one small notebook), then what a job does to write its feedback (a new exporter, as generate_feedback builds
# it, rendering that notebook); prints how many templates the job compiled, what it imported, and the page.
JOB = """
import json, sys, threading, jinja2, nbformat
from autograder.nbgrader import job_warmup
compiled = []
compile_source = jinja2.Environment.compile
def counting(self, source, name=None, filename=None, raw=False, defer_init=False):
    compiled.append(name)
    return compile_source(self, source, name, filename, raw, defer_init)
jinja2.Environment.compile = counting
repo, source, assignment, notebook, warm = sys.argv[1:5] + [sys.argv[5] == "warm"]
if warm:
    assert job_warmup.warm_jobs(repo, source, assignment)
    assert not job_warmup.warm_jobs(repo, source, assignment)  # once per process
threads = threading.active_count()  # the grading process forks: it must run no thread
compiled.clear()
before = set(sys.modules)
from autograder.nbgrader import feedback_html, sanitize
rendered, checked = feedback_html.markdown_html.cache_info().misses, sanitize._markdown_is_clean_alone.cache_info().misses
page, _ = job_warmup.feedback_exporter(repo).from_notebook_node(nbformat.read(notebook, as_version=4), resources={
    "nbgrader": {"notebook": "x", "score": 1, "max_score": 2, "late_penalty": 0}})
print(json.dumps({"threads": threads, "compiled": len(compiled), "imported": sorted({m.split(".")[0] for m in set(sys.modules) - before}),
                  "markdown_rendered": feedback_html.markdown_html.cache_info().misses - rendered,
                  "markdown_checked": sanitize._markdown_is_clean_alone.cache_info().misses - checked, "page": page}))
"""


def graded_looking_notebook(folder):
    """A small notebook as the feedback gets it (math, highlighted code, an output), in ``folder``."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Scores $QK^\\top$", id="scores"),
        nbformat.v4.new_code_cell("x = 1\nprint(x)", id="code", execution_count=1, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="1")])])
    nb.metadata["language_info"] = dict(sanitize.LANGUAGE_INFO)
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "small.ipynb"))
    return folder / "small.ipynb"


def test_a_job_forked_after_the_warm_up_imports_and_compiles_nothing_more_for_its_feedback(tmp_path, monkeypatch):
    notebook = graded_looking_notebook(tmp_path / "source" / ASSIGNMENT)
    done = subprocess.run([sys.executable, "-c", JOB, str(REPO), str(tmp_path / "source"), ASSIGNMENT, str(notebook),
                           "warm"], capture_output=True, text=True, cwd=REPO, check=True)
    warm = json.loads(done.stdout.strip().splitlines()[-1])
    # without the warm-up a job compiled the feedback's 9 templates and imported IPython's lexer, matplotlib, ...
    assert warm["compiled"] == 0 and warm["threads"] == 1
    assert not {"IPython", "bs4", "soupsieve", "pygments", "matplotlib", "mistune"} & set(warm["imported"])
    assert warm["markdown_rendered"] == warm["markdown_checked"] == 0  # the notebook's Markdown: done in the warm-up
    monkeypatch.setattr(feedback_html, "TEMPLATE_BYTECODE", feedback_html.TemplateBytecode())  # empty: compiled here
    exporter = job_warmup.feedback_exporter(REPO)
    page, _ = exporter.from_notebook_node(nbformat.read(str(notebook), as_version=4), resources={
        "nbgrader": {"notebook": "x", "score": 1, "max_score": 2, "late_penalty": 0}})
    assert exporter.environment.bytecode_cache.entries  # (it was compiled and cached here)
    assert warm["page"] == page and "<math" in page and "cell-id=code" in page  # the same page, byte for byte


def test_a_warm_up_that_fails_is_logged_and_grading_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(job_warmup, "_rendered", set())  # as in a fresh grading process
    grading.copy_course(REPO, tmp_path, folders=())
    broken = grading.graded_source(tmp_path) / "source" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / "notebook.ipynb").write_text("{ not a notebook")
    grading._warm_jobs(tmp_path, ASSIGNMENT)  # raises nothing
    log = (tmp_path / "grading.log").read_text()
    assert "warming the grading jobs up failed (each job loads what it needs)" in log and "Error" in log
    assert not job_warmup._rendered


@pytest.mark.parametrize("folder", ["missing", ASSIGNMENT])
def test_an_assignment_without_a_notebook_in_the_graded_source_warms_nothing_up(tmp_path, monkeypatch, folder):
    monkeypatch.setattr(job_warmup, "_rendered", set())
    grading.copy_course(REPO, tmp_path, folders=())
    (grading.graded_source(tmp_path) / "source" / ASSIGNMENT).mkdir(parents=True)
    assert job_warmup.warm_jobs(tmp_path, grading.graded_source(tmp_path) / "source", folder) is False
    assert not (tmp_path / "grading.log").exists()


def test_jobs_forked_after_the_warm_up_find_every_reference_output_computed(tmp_path, monkeypatch):
    """The grader a job's preprocessor builds from the job's configuration is the one the warm-up filled."""
    from autograder.grader import comparison, in_process
    from autograder.nbgrader.preprocessors import course_grader
    from autograder.nbgrader.student_job import source_config

    monkeypatch.setattr(in_process, "_GRADERS", {})  # as in a fresh grading process
    grading.copy_course(REPO, tmp_path, folders=())
    kept = grading.graded_source(tmp_path) / "source" / ASSIGNMENT
    shutil.copytree(REPO / "source" / ASSIGNMENT, kept)  # the gradebook's copy of source/
    counted = job_warmup.warm_reference_outputs(tmp_path, ASSIGNMENT)
    grader = course_grader(source_config(tmp_path, ASSIGNMENT), {"nbgrader": {"assignment": ASSIGNMENT}})
    assert counted == sum(len(cases) for cases in grader.cases.values()) > 0
    assert grader.course_dir == grading.graded_source(tmp_path)  # the kept source, not source/ as it is now

    def computed_again(*args, **kwargs):
        raise AssertionError("a job computed a reference output the warm-up had computed")

    monkeypatch.setattr(comparison, "_quiet_call", computed_again)
    expected = {(g, i): grader.expected(g, i) for g, cases in grader.cases.items() for i in range(len(cases))}
    assert len(expected) == counted
    assert job_warmup.warm_reference_outputs(tmp_path, "not-an-assignment") == 0


def test_the_reference_leaves_every_hidden_input_as_it_found_it():
    """Why computing the reference's outputs before a job sends the hidden inputs changes nothing it sends.

    Cases with a memory limit are left out: the reference runs on them in a forked child, which cannot change
    this process's arrays.
    """
    from attention_lab.core import values as wire
    from autograder import assignments
    from autograder.grader.comparison import Grader

    for name, assignment in assignments.all_assignments().items():
        grader = Grader(assignment, REPO)
        for grade_id, cases in grader.cases.items():
            for index, case in enumerate(cases):
                if case.memory_limit is not None or case.reads:
                    continue
                before = json.dumps([[wire.encode(a) for a in case.args],
                                     {k: wire.encode(v) for k, v in case.kwargs.items()}], sort_keys=True)
                grader.expected(grade_id, index)
                after = json.dumps([[wire.encode(a) for a in case.args],
                                    {k: wire.encode(v) for k, v in case.kwargs.items()}], sort_keys=True)
                assert after == before, f"{name} {grade_id}[{index}]: the reference changed its inputs"


def test_a_markdown_cell_rendered_or_checked_once_per_process_gives_what_a_fresh_rendering_gives():
    """The cached HTML and sanitiser check of every Markdown cell of the release are those of a fresh rendering."""
    sources = [cell.source for path in sorted((REPO / "release").glob("*/*.ipynb"))
               for cell in nbformat.read(str(path), as_version=4).cells if cell.cell_type == "markdown"]
    sources += ["<img src=x onerror=alert(1)> $x$", "# Title\n\n$$\\frac{a}{b}$$ and `code`"]
    assert len(sources) > 100
    for source in sources:
        fresh = feedback_html.MarkdownWithMath(renderer=feedback_html.MathMLRenderer(escape=False)).render(source)
        assert feedback_html.markdown_html(source) == feedback_html.markdown_html(source) == fresh
        assert sanitize._markdown_is_clean(source, None) is sanitize._check_markdown(source, None)
    assert sanitize._markdown_is_clean("<img src=x onerror=alert(1)>", None) is False
    assert sanitize._markdown_is_clean("plain *text*", None) is True


def test_a_markdown_cell_with_attachments_is_rendered_from_its_own_attachments():
    """Two cells with the same Markdown and different attachments never share a rendering."""
    source = "![plot](attachment:plot.png)"
    pages = []
    for pixel in ("iVBORw0KGgoAAAA", "iVBORw0KGgoBBBB"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source, attachments={
            "plot.png": {"image/png": pixel}})])
        pages.append(feedback_html.FeedbackExporter().from_notebook_node(nb)[0])
    assert "data:image/png;base64,iVBORw0KGgoAAAA" in pages[0] and "data:image/png;base64,iVBORw0KGgoBBBB" in pages[1]


def test_the_sandboxes_package_copies_carry_bytecode_their_python_uses_and_compiled_once(tmp_path):
    """The kernel's Python loads each module of the copy from its compiled code, never a stale one."""
    from autograder.sandbox import mounts

    assert job_warmup.compile_student_packages(REPO) > 10  # what the grading process compiles before it forks
    compiled = mounts.compiled_module.cache_info()
    copies = mounts.package_copies(mounts.KernelView(), tmp_path / "packages")
    assert mounts.compiled_module.cache_info().misses == compiled.misses  # every module: already compiled
    probe = copies / "attention_lab" / "core" / "probe.py"
    bytecode = probe.parent / "__pycache__" / f"probe.{sys.implementation.cache_tag}.pyc"
    assert bytecode.is_file() and oct(bytecode.stat().st_mode & 0o777) == "0o644"

    def loaded_from() -> str:
        done = subprocess.run([sys.executable, "-v", "-c", "import attention_lab.core.probe"], capture_output=True,
                              text=True, cwd=tmp_path, check=True,
                              env={"PYTHONPATH": str(copies), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"})
        return next(line for line in done.stderr.splitlines()
                    if line.startswith("# code object from") and "core/" in line and "/probe." in line)

    assert loaded_from() == f"# code object from '{bytecode}'"
    probe.chmod(0o644)
    probe.write_text(probe.read_text() + "\nCHANGED = True\n")  # its bytecode no longer matches: the source is compiled
    assert "__pycache__" not in loaded_from()
