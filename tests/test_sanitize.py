"""The stored notebook is inert: every payload kind, rendered by nbgrader's own Formgrader and feedback templates.

The notebook is sanitised as grading stores it, then rendered to HTML exactly
as Formgrader's manual-grading view (template ``formgrade``) and
``generate_feedback`` (template ``feedback``) render it; the HTML is searched
for anything that could run. Honest Markdown (LaTeX, inline HTML) and PNG
figures come through unchanged. The browser itself is in test_formgrader_browser.py.
"""

import copy
import os

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

import nbgrader
from autograder.examples import hostile_payloads as payloads
from autograder.nbgrader.notebook_cells import read, solution_cells
from autograder.nbgrader.sanitize import (clean_html, inert_markdown, is_clean, render_markdown, sanitize_notebook,
                                 sanitize_output)
from conftest import RELEASE_NB, REPO, SOURCE_NB

FORMGRADER = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader")
TEMPLATES = os.path.join(FORMGRADER, "templates")
BOOTSTRAP_CSS = os.path.join(FORMGRADER, "static", "node_modules", "bootstrap", "dist", "css")


def rendered(nb, template: str) -> str:
    """HTML of ``nb`` as Formgrader ("formgrade") or generate_feedback ("feedback") renders it."""
    config = Config()
    config.HTMLExporter.template_name = template
    config.HTMLExporter.extra_template_basedirs = [TEMPLATES]
    config.HTMLExporter.extra_template_paths = [BOOTSTRAP_CSS]  # as GenerateFeedback configures it
    resources = {"base_url": "", "submission_id": "1", "notebook_id": "nb", "assignment_id": "a", "index": 0,
                 "total": 1, "student": "s", "last_name": "", "first_name": "", "notebook_path": "",
                 "metadata": {"name": "nb"},
                 "nbgrader": {"notebook": "nb", "score": 10, "max_score": 10, "late_penalty": 0}}
    nb = copy.deepcopy(nb)
    for cell in nb.cells:  # what nbgrader's GetGrades adds before the feedback template runs
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader["score"] = cell.metadata.nbgrader.get("points", 0)
    html, _ = HTMLExporter(config=config).from_notebook_node(nb, resources=resources)
    return html


@pytest.fixture(scope="module")
def hostile_nb():
    """The correct solution carrying every payload kind, with outputs as the sandboxed kernel would make them."""
    nb = payloads.browser_submission(read(RELEASE_NB), solutions=solution_cells(read(SOURCE_NB)))
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    js = payloads.script("output")
    cell.outputs += [
        nbformat.v4.new_output("display_data", data={"text/html": f"<img src=x onerror=\"{js}\"><b>kept</b>",
                                                     "text/plain": "<HTML>"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": js, "text/plain": "<JS>"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": f"<svg><script>{js}</script></svg>"}),
        nbformat.v4.new_output("display_data", data={"text/markdown": f"[x](javascript:{js}) and $x^2$"}),
        nbformat.v4.new_output("display_data", data={"image/png": payloads.PNG},
                               metadata={"image/png": {"width": f"4 onerror={js}"}}),
        nbformat.v4.new_output("display_data", data={"image/png": "PHN2Zz48L3N2Zz4="}),  # "<svg></svg>", not a PNG
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "1"},
                                                     "text/plain": "a widget"}),
        nbformat.v4.new_output("display_data", data={"text/html": "<iframe src='http://127.0.0.1:9'></iframe>"
                                                                  "<form><input name=q></form>"}),
    ]
    cell.execution_count = 3
    return nb


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_unsanitised_the_payloads_would_run_in_both_views(hostile_nb, template):
    # the test of the test: without the sanitiser, nbgrader's templates render the payloads active
    found = payloads.active_content(rendered(copy.deepcopy(hostile_nb), template))
    assert any("onerror" in item for item in found) and any("javascript:" in item for item in found), found
    assert payloads.stored_active_content(hostile_nb)


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_sanitised_nothing_runs_in_formgrader_or_feedback(hostile_nb, template):
    nb = copy.deepcopy(hostile_nb)
    changes = sanitize_notebook(nb)
    assert changes
    assert payloads.stored_active_content(nb) == []
    page = rendered(nb, template)
    own = payloads.active_content(rendered(nbformat.v4.new_notebook(), template))  # the template's own handlers
    assert [item for item in payloads.active_content(page) if item not in own] == []
    assert "<b>kept</b>" in page  # sanitised HTML stays HTML
    assert f"data:image/png;base64,{payloads.PNG}" in page  # the honest figure still shows
    assert "$$\\sum_j A_{ij} = 1$$" in page and "<sub>2</sub>" in page  # LaTeX left for MathJax, inline HTML kept
    nbformat.validate(nb)


def test_honest_markdown_of_every_course_notebook_is_kept_verbatim():
    for path in sorted([*REPO.glob("source/*/*.ipynb"), *REPO.glob("release/*/*.ipynb")]):
        nb = read(path)
        before = [c.source for c in nb.cells]
        assert sanitize_notebook(nb) == {}, path
        assert [c.source for c in nb.cells] == before, path


@pytest.mark.parametrize("source", [
    "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "[x](JaVaScRiPt:alert(1))",
    "<a href='javascript:alert(1)'>x</a>", "<iframe src=//evil></iframe>", "<form><button>go</button></form>",
    "<svg onload=alert(1)>", "<svg><script>alert(1)</script></svg>", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "```mermaid\n<img src=x onerror=alert(1)>\n```", "<details open ontoggle=alert(1)>", "![x](javascript:alert(1))",
    "<object data=x.swf></object>", "<embed src=x>", "<base href=//evil/>", "<meta http-equiv=refresh content=0;url=//evil>",
    "<a href=\"jav&#x09;ascript:alert(1)\">x</a>", "<style>body{background:url(//evil)}</style>",
    "<!--><img src=x onerror=alert(1)>-->", "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
])
def test_hostile_markdown_renders_inert_in_nbconvert(source):
    stored, changed = inert_markdown(source)
    assert changed
    html = render_markdown(stored)
    assert is_clean(html)
    assert payloads.active_content(html) == []


@pytest.mark.parametrize("source", [
    "$\\frac{QK^\\top}{\\sqrt{d_k}}$ and $a < b$", "$$\\sum_j A_{ij} = 1$$", "\\begin{align}x &= 1\\end{align}",
    "| a | b |\n|:--|--:|\n| 1 | 2 |", "- [x] done\n- [ ] todo", "H<sub>2</sub>O and x<sup>2</sup>, <b>b</b><br>",
    "> quoted `code < 3`\n\n```python\nprint('<b>')\n```", "[paper](https://arxiv.org/abs/1706.03762)",
    "<math><mi>x</mi><mo>=</mo><mn>2</mn></math>", "<!-- a note to myself -->",
])
def test_honest_markdown_is_kept_as_written(source):
    assert inert_markdown(source) == (source, False)


def test_outputs_keep_only_inert_types():
    for data, kept in [({"application/javascript": "x", "text/plain": "p"}, {"text/plain"}),
                       ({"image/svg+xml": "<svg/>"}, {"text/plain"}),
                       ({"image/png": payloads.PNG, "text/plain": "fig"}, {"image/png", "text/plain"}),
                       ({"text/latex": "$x$"}, {"text/latex"}),
                       ({"application/pdf": "JVBER"}, {"text/plain"})]:
        clean, _ = sanitize_output(nbformat.v4.new_output("display_data", data=data))
        assert set(clean["data"]) == kept, data
    clean, removed = sanitize_output({"output_type": "display_data", "data": {"text/plain": "x"}})
    assert removed == [] and clean["data"] == {"text/plain": "x"}
    assert sanitize_output({"output_type": "weird"})[0] is None
    assert clean_html('<a href="javascript:x" onclick="y">t</a>') == "<a>t</a>"


def test_attachments_keep_only_png_and_jpeg_and_execution_counts_are_numbers():
    cell = nbformat.v4.new_markdown_cell("![a](attachment:a.svg)")
    cell.attachments = {"a.svg": {"image/svg+xml": "PHN2Zy8+", "image/png": payloads.PNG}}
    code = nbformat.v4.new_code_cell("1")
    code["execution_count"] = "<script>alert(1)</script>"
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell, code]
    sanitize_notebook(nb)
    assert cell.attachments == {"a.svg": {"image/png": payloads.PNG}}
    assert code.execution_count is None


def test_unsafe_grade_ids_lose_their_nbgrader_metadata():
    cell = nbformat.v4.new_code_cell("1")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": '"><img src=x onerror=alert(1)>', "points": 1}
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell]
    assert sanitize_notebook(nb) == {1: ["nbgrader metadata with an unsafe grade_id"]}
    assert "nbgrader" not in cell.metadata
