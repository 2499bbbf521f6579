"""Nothing a submission holds runs in a browser: the graded notebook is stored inert.

nbgrader's Formgrader (manual grading) and ``generate_feedback`` render the
*autograded* notebook to HTML in the instructor's and the student's browser,
and they pass Markdown cells' raw HTML and ``text/html``/``application/javascript``/SVG
outputs through as they are (Formgrader's template does not even apply
nbconvert's ``clean_html``). A learner's ``<img src=x onerror=…>`` would run
in the JupyterLab origin, with the instructor's rights.

:class:`SanitizeNotebook` runs last in the autograde pipeline (and first in
``generate_feedback``'s), so the notebook nbgrader *stores* is already clean
and every later viewer gets the clean version:

* **Markdown** (cells and ``text/markdown`` outputs) is rendered with
  nbconvert's own renderer (mistune, the one Formgrader and feedback use) and
  the result is checked with the maintained sanitiser `nh3
  <https://nh3.readthedocs.io>`_ (ammonia) against :data:`POLICY`. A cell
  whose rendering the sanitiser leaves unchanged is kept verbatim, so honest
  Markdown, inline HTML such as ``<sub>`` and LaTeX stay as written. Any
  other cell is re-written from mistune's syntax tree with its raw HTML shown
  as text and unsafe links and images reduced to their text; if even that
  does not render clean, the cell becomes its source in a fenced code block.
  Every stored Markdown source is checked once more after the rewrite.
* **Outputs** keep only inert MIME types: ``text/plain``, ``text/latex``,
  ``text/html`` and ``text/markdown`` (sanitised), PNG and JPEG (checked to be
  PNG/JPEG data). JavaScript, SVG, PDF, widget views and anything unknown are
  dropped, with a ``text/plain`` note saying so; output metadata keeps only
  numeric image sizes (nbconvert writes ``width=`` unquoted).
* **Attachments** keep only PNG/JPEG; raw cells are sanitised like HTML;
  ``execution_count`` must be an integer; ``language_info`` and widget state
  come from the grader, not the kernel; nbgrader metadata whose ``grade_id``
  is not a plain identifier is dropped (Formgrader writes it into ``id="…"``).

The submission as handed in is never changed: ``submitted/<student>/<assignment>/``
keeps the unsanitised original for the instructor to download.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
from html.parser import HTMLParser

import nh3
from mistune.renderers.markdown import MarkdownRenderer
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbgrader.preprocessors import NbGraderPreprocessor

#: MathML presentation elements (what MathJax and browsers render); no annotation-xml or maction.
MATHML_TAGS = {"math", "mi", "mn", "mo", "ms", "mspace", "mtext", "mrow", "mfrac", "msqrt", "mroot", "msub",
               "msup", "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd", "mstyle", "semantics",
               "annotation", "mpadded", "mphantom", "menclose", "mfenced"}
MATHML_ATTRIBUTES = {"mathvariant", "display", "displaystyle", "scriptlevel", "fence", "stretchy", "separator",
                     "lspace", "rspace", "accent", "accentunder", "columnalign", "rowalign", "notation",
                     "linethickness", "encoding", "open", "close", "separators", "xmlns", "form", "largeop",
                     "movablelimits", "symmetric", "minsize", "maxsize", "mathsize", "width", "height", "depth",
                     "voffset", "columnspacing", "rowspacing", "columnlines", "rowlines", "frame"}
#: Tags of rendered Markdown: ammonia's defaults (no area/map), task-list checkboxes and MathML.
TAGS = (set(nh3.ALLOWED_TAGS) - {"area", "map"}) | {"input"} | MATHML_TAGS
ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items() if tag in TAGS},
    # aria-describedby names the id of an element that describes this one (a figure's caption): inert
    "*": {"class", "id", "title", "style", "align", "colspan", "rowspan", "aria-describedby"},
    "input": {"type", "checked", "disabled"},
    **{tag: set(MATHML_ATTRIBUTES) for tag in MATHML_TAGS},
}
#: Only these inline styles survive (mistune writes table alignment as style="text-align:…").
STYLE_PROPERTIES = {"text-align"}
IMAGE_MIME = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg);base64,[A-Za-z0-9+/=\s]*$")
_LINK = re.compile(r"^(https?://|mailto:|#)", re.IGNORECASE)
#: Output MIME types that render inert (the HTML/Markdown ones after sanitising).
KEPT_MIME = {"text/plain", "text/latex", "text/html", "text/markdown", *IMAGE_MIME}
SAFE_GRADE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3", "codemirror_mode": {"name": "ipython", "version": 3},
                 "file_extension": ".py", "mimetype": "text/x-python", "nbconvert_exporter": "python"}


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep only inert URLs: links to http(s), mailto and fragments; images as PNG/JPEG data."""
    if attribute == "href" or (attribute in ("cite",) and tag in ("blockquote", "del", "ins", "q")):
        return value if _LINK.match(value.strip()) else None
    if attribute == "src":
        return value if _DATA_IMAGE.match(value.strip()) else None
    if tag == "input" and attribute == "type":
        return value if value.lower() == "checkbox" else None
    return value


#: The allow-list, as one reusable nh3 cleaner.
POLICY = nh3.Cleaner(tags=TAGS, clean_content_tags={"script", "style"}, attributes=ATTRIBUTES,
                     attribute_filter=_attribute_filter, strip_comments=False, link_rel=None,
                     url_schemes={"http", "https", "mailto", "data"}, filter_style_properties=STYLE_PROPERTIES)


def clean_html(fragment: str) -> str:
    """``fragment`` sanitised with :data:`POLICY` (no script, event handler, ``javascript:`` URL, iframe or form)."""
    return POLICY.clean(fragment)


class _Events(HTMLParser):
    """What a browser would build from HTML, as comparable events (start tags with attributes, text, comments)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events: list = []

    def handle_starttag(self, tag, attrs):
        self.events.append(("tag", tag, tuple(sorted((k, "" if v is None else v.replace(" ", "")) for k, v in attrs))))

    def handle_data(self, data):
        if self.events and self.events[-1][0] == "text":
            self.events[-1] = ("text", self.events[-1][1] + data)
        else:
            self.events.append(("text", data))

    def handle_comment(self, data):
        self.events.append(("comment", data))

    def handle_pi(self, data):
        self.events.append(("pi", data))

    def unknown_decl(self, data):
        self.events.append(("decl", data))


def _events(fragment: str) -> list:
    parser = _Events()
    parser.feed(fragment)
    parser.close()
    return parser.events


def is_clean(fragment: str) -> bool:
    """Whether the sanitiser leaves ``fragment`` as it is (same tags, attributes, text): nothing active in it.

    The sanitiser (:func:`clean_html`) decides; the comparison only tells a
    changed result from a re-serialised one (quotes, entities, end tags).
    """
    return _events(fragment) == _events(clean_html(fragment))


# ---- Markdown ----------------------------------------------------------------------------------

def render_markdown(source: str, attachments: dict | None = None) -> str:
    """HTML of a Markdown cell as nbconvert (Formgrader, feedback) renders it: mistune with math, raw HTML kept.

    Raises
    ------
    nbconvert.filters.markdown_mistune.InvalidNotebook
        If the cell refers to an attachment it does not have.
    """
    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=attachments or {})).render(source)


#: How many Markdown sources' check (and feedback HTML) a process keeps, each at most MARKDOWN_CACHE_CHARS long:
#: an assignment's own cells (149 in all seven, none over 5 000 characters) are checked for every student.
MARKDOWN_CACHE_SIZE = 1024
MARKDOWN_CACHE_CHARS = 20_000


def _markdown_is_clean(source: str, attachments: dict | None) -> bool:
    if not attachments and len(source) <= MARKDOWN_CACHE_CHARS:
        return _markdown_is_clean_alone(source)
    return _check_markdown(source, attachments)


@functools.lru_cache(maxsize=MARKDOWN_CACHE_SIZE)
def _markdown_is_clean_alone(source: str) -> bool:
    """:func:`_markdown_is_clean` of a cell without attachments, once per process and source.

    Every submission repeats the assignment's own Markdown, and each job checks it twice (autograde, feedback):
    the grading process checks the source notebook's cells before it forks the jobs
    (:mod:`autograder.nbgrader.job_warmup`), so that a job checks only the cells its student wrote. Without
    attachments the answer depends on the source alone (rendering reads no file).
    """
    return _check_markdown(source, None)


def _check_markdown(source: str, attachments: dict | None) -> bool:
    try:
        return is_clean(render_markdown(source, attachments))
    except Exception:  # noqa: BLE001 — anything nbconvert cannot render is not known to be clean
        return False


def _safe_image(url: str) -> bool:
    return url.startswith("attachment:") or bool(_DATA_IMAGE.match(url))


class _InertMarkdown(MarkdownRenderer):
    """Markdown back from mistune's syntax tree, with raw HTML as text and unsafe links as their text."""

    def inline_html(self, token, state):
        return html.escape(token["raw"], quote=False)

    def block_html(self, token, state):
        return html.escape(token["raw"], quote=False) + "\n\n"

    def link(self, token, state):
        if not _LINK.match(token["attrs"].get("url", "").strip()):
            return self.render_children(token, state)
        return super().link(token, state)

    def image(self, token, state):
        if not _safe_image(token["attrs"].get("url", "").strip()):
            return self.render_children(token, state)
        return super().image(token, state)

    def block_code(self, token, state):
        if token.get("attrs", {}).get("info", "").strip().startswith("mermaid"):
            token = {**token, "attrs": {**token["attrs"], "info": "text"}}  # mermaid blocks are not escaped
        return super().block_code(token, state)

    def block_math(self, token, state):
        return f"$${token['raw']}$$"

    def inline_math(self, token, state):
        return f"${token['raw']}$"

    def latex_environment(self, token, state):
        attrs = token["attrs"]
        return f"\\begin{{{attrs['name']}}}{attrs['body']}\\end{{{attrs['name']}}}"

    def def_list(self, token, state):
        return self.render_children(token, state) + "\n"

    def def_list_head(self, token, state):
        return self.render_children(token, state) + "\n"

    def def_list_item(self, token, state):
        return ": " + self.render_children(token, state) + "\n"


def _as_code_block(source: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{source}\n{fence}"


REWRITE_NOTE = "> *The grader showed this cell's HTML as text: it could have run in a browser.*\n\n"


def inert_markdown(source: str, attachments: dict | None = None) -> tuple[str, bool]:
    """A Markdown source that renders to nothing active, and whether it had to change.

    Parameters
    ----------
    source : str
        Markdown, as a learner wrote it (raw HTML and LaTeX allowed).
    attachments : dict, optional
        The cell's attachments (name → {mime type: base64}), already sanitised.

    Returns
    -------
    source : str
        ``source`` itself when nbconvert's rendering of it is clean; else the
        same document with raw HTML shown as text and unsafe links and images
        reduced to their text; else the source as a fenced code block.
    changed : bool
    """
    if _markdown_is_clean(source, attachments):
        return source, False
    try:
        tokens, state = MarkdownWithMath(renderer=None).parse(source)
        rewritten = REWRITE_NOTE + _InertMarkdown()(tokens, state)
    except Exception:  # noqa: BLE001 — a tree the Markdown writer does not know: fall back to plain text
        rewritten = ""
    if not rewritten or not _markdown_is_clean(rewritten, attachments):
        rewritten = REWRITE_NOTE + _as_code_block(source)
    return rewritten, True


# ---- outputs, attachments, cells ---------------------------------------------------------------------

def _is_image(mime: str, data) -> bool:
    if not isinstance(data, str):
        return False
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw.startswith(IMAGE_MIME[mime])


def _image_metadata(metadata) -> dict:
    """Output metadata nbconvert's templates read, as plain values (they write width/height unquoted)."""
    kept = {}
    for mime in IMAGE_MIME:
        entry = metadata.get(mime) if isinstance(metadata, dict) else None
        if isinstance(entry, dict):
            sizes = {key: int(entry[key]) for key in ("width", "height")
                     if isinstance(entry.get(key), (int, float)) and not isinstance(entry.get(key), bool)}
            if entry.get("needs_background") in ("light", "dark"):
                sizes["needs_background"] = entry["needs_background"]
            if sizes:
                kept[mime] = sizes
    return kept


def sanitize_output(output) -> tuple[dict | None, list[str]]:
    """An inert copy of one code-cell output (or None to drop it), and what was removed, in words."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": str(output.get("text", ""))}, []
    if kind == "error":
        return {"output_type": "error", "ename": str(output.get("ename", "")), "evalue": str(output.get("evalue", "")),
                "traceback": [str(line) for line in output.get("traceback", []) if isinstance(line, str)]}, []
    if kind not in ("display_data", "execute_result"):
        return None, [f"an output of type {str(kind)[:40]!r}"]
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    kept, removed = {}, []
    for mime, value in data.items():
        text = "".join(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value
        if mime not in KEPT_MIME or not isinstance(text, str):
            removed.append(str(mime)[:60])
        elif mime == "text/html":
            kept[mime] = clean_html(text)
            if not is_clean(text):
                removed.append("active HTML")
        elif mime == "text/markdown":
            kept[mime], changed = inert_markdown(text)
            if changed:
                removed.append("active Markdown")
        elif mime in IMAGE_MIME and not _is_image(mime, text):
            removed.append(f"{mime} that is not {mime.split('/')[1].upper()} data")
        else:
            kept[mime] = text
    if "text/plain" not in kept and removed and not any(m in kept for m in ("text/html", "text/markdown", *IMAGE_MIME)):
        kept["text/plain"] = f"[output removed by the grader: {', '.join(removed)} can run in a browser]"
    metadata = _image_metadata(output.get("metadata"))
    claimed = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
    if any(isinstance(claimed.get(mime), dict) and {k: v for k, v in claimed[mime].items()
                                                   if k in ("width", "height")} != {k: v for k, v in metadata.get(
                                                       mime, {}).items() if k in ("width", "height")}
           for mime in IMAGE_MIME):
        removed.append("an image size that is not a number")
    clean = {"output_type": kind, "data": kept, "metadata": metadata}
    if kind == "execute_result":
        count = output.get("execution_count")
        clean["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
    return clean, removed


def sanitize_attachments(attachments) -> tuple[dict, list[str]]:
    """Only PNG/JPEG attachments (a Markdown image from an SVG attachment would be preferred by nbconvert)."""
    kept, removed = {}, []
    for name, bundle in (attachments or {}).items():
        images = {mime: data for mime, data in (bundle or {}).items() if mime in IMAGE_MIME and _is_image(mime, data)}
        if len(images) != len(bundle or {}):
            removed.append(f"attachment {str(name)[:40]!r}")
        if images:
            kept[str(name)] = images
    return kept, removed


def sanitize_cell(cell) -> list[str]:
    """Make one cell inert in place; return what was removed or rewritten, in words."""
    removed: list[str] = []
    meta = cell.setdefault("metadata", {})
    grading = meta.get("nbgrader")
    if grading is not None and not (isinstance(grading, dict) and isinstance(grading.get("grade_id", ""), str)
                                    and SAFE_GRADE_ID.match(grading.get("grade_id") or "x")):
        meta.pop("nbgrader")
        removed.append("nbgrader metadata with an unsafe grade_id")
    meta.pop("widgets", None)
    if "attachments" in cell:
        cell["attachments"], lost = sanitize_attachments(cell.get("attachments"))
        removed += lost
        if not cell["attachments"]:
            del cell["attachments"]
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else str(source)
    if cell.get("cell_type") == "markdown":
        cell["source"], changed = inert_markdown(source, cell.get("attachments"))
        if changed:
            removed.append("HTML in Markdown")
    elif cell.get("cell_type") == "raw":
        if str(meta.get("raw_mimetype", "")).lower() in ("", "text/html"):
            cell["source"] = clean_html(source)
            if not is_clean(source):
                removed.append("active HTML in a raw cell")
    elif cell.get("cell_type") == "code":
        count = cell.get("execution_count")
        cell["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
        outputs = []
        for output in cell.get("outputs", []):
            clean, lost = sanitize_output(output)
            removed += lost
            if clean is not None:
                outputs.append(type(output)(clean) if isinstance(output, dict) else clean)
        cell["outputs"] = outputs
    return removed


def sanitize_notebook(nb) -> dict[int, list[str]]:
    """Make every cell of ``nb`` inert in place (see the module docstring).

    Returns
    -------
    dict
        Cell number (from 1) → what was removed there, for cells that changed.
    """
    nb.metadata.pop("widgets", None)
    if "language_info" in nb.metadata:
        nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    changes = {}
    for index, cell in enumerate(nb.cells):
        removed = sanitize_cell(cell)
        if removed:
            changes[index + 1] = removed
    return changes


class SanitizeNotebook(NbGraderPreprocessor):
    """Store the graded notebook inert: last in ``Autograde.autograde_preprocessors``, first in ``GenerateFeedback``'s.

    What it removed is listed in ``nb.metadata["attention_lab"]["sanitized"]``
    (cell number → what), and the grading table notes it.
    """

    def preprocess(self, nb, resources):
        changes = sanitize_notebook(nb)
        notes = nb.metadata.setdefault("attention_lab", {})
        if changes:
            notes["sanitized"] = {str(k): v[:10] for k, v in changes.items()}
            self.log.warning("Removed content that could run in a browser from cells %s", sorted(changes))
        return nb, resources


def inert_text(text: str, limit: int = 120) -> str:
    """A learner-controlled string (a student id, a file name) shown inert in one line: escaped and capped."""
    shown = text.encode("unicode_escape").decode("ascii")
    return repr(shown[:limit] + ("…" if len(shown) > limit else ""))
