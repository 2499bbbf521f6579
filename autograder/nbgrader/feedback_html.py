"""Feedback HTML that reads well where the learner opens it, with no script: math as MathML, long lines wrapped.

nbgrader's feedback template leaves the LaTeX of Markdown cells as ``$…$`` text for MathJax, a script
fetched from the network: JupyterLab's HTML viewer runs no scripts and an offline browser fetches nothing,
so the learner read raw LaTeX. :class:`FeedbackExporter` (``c.GenerateFeedback.exporter_class``) renders
Markdown with :class:`MathMLRenderer`, which writes each formula as MathML when the feedback is written
(`latex2mathml <https://pypi.org/project/latex2mathml/>`_): browsers draw MathML themselves. The MathML
passes the course's sanitiser (:func:`autograder.nbgrader.sanitize.clean_html`, whose allow-list holds the
MathML presentation elements and attributes only), since the LaTeX may be the learner's and the converter
copies ``\\text{…}`` and ``\\href`` through as they are. A formula the converter cannot read stays LaTeX text.

:data:`READABLE_CSS` (added by :class:`ReadableFeedback`, after nbconvert's ``CSSHTMLHeaderPreprocessor``)
wraps long lines of code and output instead of widening the page, and lets wide formulas and tables
scroll on their own.

:data:`TEMPLATE_BYTECODE` keeps the feedback templates' compiled code in memory: the grading process renders
them once before it forks the students' jobs (:mod:`autograder.nbgrader.job_warmup`), so that no job parses
and compiles the nine Jinja templates again. The same warm-up renders the assignment's own Markdown cells, which
:func:`markdown_html` keeps: a job renders only what its student wrote.

nbconvert's ``HTMLExporter`` parses every page it writes again with BeautifulSoup (Python's ``html.parser``:
0.7-1.3 CPU-s for an assignment's feedback, mostly Pygments' spans) to give images without ``alt`` one and to make
JupyterLab-template cells focusable. :meth:`FeedbackExporter.from_notebook_node` renders as it does and makes the
same two changes (:func:`accessible_html`), but parses only a page that holds an image or a JupyterLab-template cell:
nbgrader's feedback template is the classic one, so a page without an image has nothing that pass would change.
"""

from __future__ import annotations

import functools

from jinja2 import BytecodeCache, pass_context
from jinja2.bccache import Bucket
from latex2mathml.converter import convert
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.nbgrader.sanitize import MARKDOWN_CACHE_CHARS, MARKDOWN_CACHE_SIZE, clean_html

#: Wrap what would widen the page past the window (the viewer's pane is often narrow); scroll what cannot wrap.
READABLE_CSS = """
pre, .highlight pre, div.output_area pre, div.output_text pre {
  white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal;
}
div.text_cell_render, div.output_area, div.output_subarea, div.inner_cell { min-width: 0; overflow-wrap: anywhere; }
div.prompt { min-width: 0; }
math[display="block"] { display: block math; overflow-x: auto; max-width: 100%; }
div.text_cell_render table { display: block; max-width: 100%; overflow-x: auto; margin: 0.5em 0; }
div.text_cell_render th, div.text_cell_render td { padding: 0.15em 0.8em 0.15em 0; vertical-align: top; }
img { max-width: 100%; height: auto; }
"""


def latex_to_mathml(latex: str, display: str = "inline") -> str | None:
    """The sanitised MathML of one formula, or None when the converter cannot read it.

    Parameters
    ----------
    latex : str
        The formula without its delimiters, e.g. ``QK^\\top`` (from ``$QK^\\top$``).
    display : {"inline", "block"}
        ``inline`` for ``$…$``, ``block`` for ``$$…$$`` and LaTeX environments.

    Returns
    -------
    str or None
        ``<math …>…</math>`` that :func:`autograder.nbgrader.sanitize.clean_html` leaves inert.
    """
    try:
        mathml = convert(latex, display=display)
    except Exception:  # noqa: BLE001 — the converter raises many kinds of error on LaTeX it does not know
        return None
    clean = clean_html(mathml)
    return clean if clean.startswith("<math") else None


class MathMLRenderer(IPythonRenderer):
    """nbconvert's Markdown renderer, with each formula written as MathML instead of ``$…$`` for MathJax."""

    def block_math(self, body: str) -> str:
        return latex_to_mathml(body, "block") or super().block_math(body)

    def inline_math(self, body: str) -> str:
        return latex_to_mathml(body, "inline") or super().inline_math(body)

    def latex_environment(self, name: str, body: str) -> str:
        return (latex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block")
                or super().latex_environment(name, body))


class TemplateBytecode(BytecodeCache):
    """Jinja's bytecode cache, in this process's memory (a forked job gets a copy, never writes the parent's).

    Jinja checks each entry against the sha1 of the template's source (``Bucket.checksum``) and compiles a
    template whose source changed again; the key also holds the environment's compile settings (async,
    extensions, delimiters), since Jinja's own key is the template's name and file only.
    """

    def __init__(self) -> None:
        self.entries: dict[tuple, bytes] = {}

    @staticmethod
    def _key(bucket: Bucket) -> tuple:
        env = bucket.environment
        return (bucket.key, env.is_async, tuple(sorted(env.extensions)), env.block_start_string,
                env.block_end_string, env.variable_start_string, env.variable_end_string, env.comment_start_string,
                env.comment_end_string, env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks,
                env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline, env.optimized)

    def load_bytecode(self, bucket: Bucket) -> None:
        data = self.entries.get(self._key(bucket))
        if data is not None:
            bucket.bytecode_from_string(data)  # resets itself when the checksum is not the source's

    def dump_bytecode(self, bucket: Bucket) -> None:
        self.entries[self._key(bucket)] = bucket.bytecode_to_string()


#: The feedback templates' compiled code, shared by every :class:`FeedbackExporter` of this process.
TEMPLATE_BYTECODE = TemplateBytecode()


#: What :func:`accessible_html` changes (lower case): an image, and the cells of nbconvert's JupyterLab template.
#: A page without any of them is what that pass would return.
ACCESSIBILITY_MARKERS = ("<img", "jp-cell-inputwrapper", "jp-outputarea-output")
#: The text alternative nbconvert gives an image that has none (``HTMLExporter.from_notebook_node``).
MISSING_ALT = "No description has been provided for this image"


def accessible_html(html: str) -> tuple[str, int]:
    """What nbconvert's ``HTMLExporter`` does to every page after rendering it, as it does it.

    Each ``<img>`` without an ``alt`` gets :data:`MISSING_ALT`, and the input wrapper and each output of
    a cell of nbconvert's JupyterLab template (``.jp-Notebook div.jp-Cell-inputWrapper``, ``div.jp-OutputArea-output``)
    get ``tabindex="0"``, so that keyboard users can reach them and scroll them.

    Parameters
    ----------
    html : str
        A whole page.

    Returns
    -------
    (str, int)
        The page re-serialised by BeautifulSoup (``html.parser``), and how many images lacked ``alt``.
    """
    soup = BeautifulSoup(html, features="html.parser")
    missing_alt = 0
    for element in soup.select("img:not([alt])"):
        element.attrs["alt"] = MISSING_ALT
        missing_alt += 1
    for element in soup.select(".jp-Notebook div.jp-Cell-inputWrapper, .jp-Notebook div.jp-OutputArea-output"):
        element.attrs["tabindex"] = "0"
    return str(soup), missing_alt


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter (nbgrader's feedback template), rendering Markdown math as MathML.

    A page is parsed again after rendering only when it holds what that pass changes (:func:`accessible_html`).
    """

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page of ``nb``, as ``HTMLExporter.from_notebook_node`` renders it.

        The same two filters are registered as there (the code highlighter for the notebook's language,
        and the choice of each output's format), then ``TemplateExporter`` renders, and
        :func:`accessible_html` runs only on a page that holds :data:`ACCESSIBILITY_MARKERS`.

        Feedback never draws a widget view: :class:`~autograder.nbgrader.sanitize.SanitizeNotebook` drops
        the views and the notebook's widget state, and the format filter here is given no widget state either,
        so a view left in some other pipeline shows as its text (nbconvert's would load the widgets' script).

        Parameters
        ----------
        nb : nbformat.NotebookNode
            The notebook.
        resources : dict, optional
            nbconvert's resources (nbgrader's feedback passes the score and the notebook's name).
        **kw
            Passed to ``TemplateExporter.from_notebook_node``.

        Returns
        -------
        (str, dict)
            The HTML page and the resources.
        """
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        self.register_filter("filter_data_type",
                             WidgetsDataTypeFilter(notebook_metadata={}, parent=self, resources=resources))
        # HTMLExporter's own from_notebook_node would parse the whole page again whatever it holds
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        lowered = html.lower()
        if any(marker in lowered for marker in ACCESSIBILITY_MARKERS):
            html, missing_alt = accessible_html(html)
            if missing_alt:
                self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
        return html, resources

    @property
    def environment(self):
        """nbconvert's Jinja environment, with the compiled templates kept in :data:`TEMPLATE_BYTECODE`."""
        environment = super().environment
        environment.bytecode_cache = TEMPLATE_BYTECODE
        return environment

    @pass_context
    def markdown2html(self, context, source):
        """Markdown → HTML as :class:`~nbconvert.exporters.HTMLExporter` does, with :class:`MathMLRenderer`.

        A cell without attachments, with images not embedded, is rendered once per process
        (:func:`markdown_html`): the assignment's own Markdown is the same in every student's feedback.
        """
        cell = context.get("cell", {})
        attachments = cell.get("attachments", {})
        if not attachments and not self.embed_images and len(source) <= MARKDOWN_CACHE_CHARS:  # see markdown_html
            return markdown_html(source, self.anchor_link_text, self.exclude_anchor_links)
        path = context.get("resources", {}).get("metadata", {}).get("path", "")
        return render_markdown_html(source, attachments, self.embed_images, path, self.anchor_link_text,
                                    self.exclude_anchor_links)


def render_markdown_html(source: str, attachments: dict, embed_images: bool, path: str, anchor_link_text: str,
                         exclude_anchor_links: bool) -> str:
    """The feedback's HTML of one Markdown cell: nbconvert's Markdown with math, rendered by :class:`MathMLRenderer`.

    Parameters
    ----------
    source : str
        The cell's Markdown.
    attachments : dict
        The cell's attachments (name → MIME bundle), which ``attachment:`` links show.
    embed_images : bool
        Whether images the Markdown links to are read from ``path`` and embedded (``HTMLExporter.embed_images``).
    path : str
        The notebook's folder (where embedded images are read from).
    anchor_link_text : str
        The text of each heading's anchor link (``HTMLExporter.anchor_link_text``).
    exclude_anchor_links : bool
        Whether headings get no anchor link (``HTMLExporter.exclude_anchor_links``).

    Returns
    -------
    str
        The cell's HTML, before nbconvert's and nbgrader's templates wrap it.
    """
    renderer = MathMLRenderer(escape=False, attachments=attachments, embed_images=embed_images, path=path,
                              anchor_link_text=anchor_link_text, exclude_anchor_links=exclude_anchor_links)
    return MarkdownWithMath(renderer=renderer).render(source)


@functools.lru_cache(maxsize=MARKDOWN_CACHE_SIZE)
def markdown_html(source: str, anchor_link_text: str = "¶", exclude_anchor_links: bool = False) -> str:
    """:func:`render_markdown_html` of a Markdown cell without attachments, images not embedded.

    Kept for the process's later calls: the grading process renders the assignment's source notebook before it
    forks the students' jobs (:mod:`autograder.nbgrader.job_warmup`), so that no job renders the assignment's
    own Markdown cells again (with MathML for each formula: about a tenth of a CPU-second a job on assignment 1);
    a job renders only the cells its student wrote. The HTML is a function of these arguments alone: without
    attachments and embedded images, nbconvert's renderer reads no file and no other state.

    Parameters
    ----------
    source : str
        The cell's Markdown.
    anchor_link_text, exclude_anchor_links : str, bool
        As :func:`render_markdown_html`'s.

    Returns
    -------
    str
        The cell's HTML, before nbconvert's and nbgrader's templates wrap it.
    """
    return render_markdown_html(source, {}, False, "", anchor_link_text, exclude_anchor_links)


class ReadableFeedback(NbGraderPreprocessor):
    """Add :data:`READABLE_CSS` to the page's inline styles (after ``CSSHTMLHeaderPreprocessor`` in ``GenerateFeedback``)."""

    def preprocess(self, nb, resources):
        inlining = resources.setdefault("inlining", {})
        inlining["css"] = [*inlining.get("css", []), READABLE_CSS]
        return nb, resources

