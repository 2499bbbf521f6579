"""Submissions that attack the browser, the class's time and the nbgrader metadata, and how to check them.

Used by :mod:`autograder.examples.hostile` (graded with nbgrader in the report and the
tests) and by the real-browser test, which opens what grading stored in
Chromium. Every script payload would set ``document.title`` to
``PWNED-<kind>`` and ``fetch`` a beacon URL, so a browser test can see
whether any ran; none must survive into the stored notebook or the feedback.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import struct
import zlib
from html.parser import HTMLParser

import nbformat

from autograder.nbgrader.notebook_cells import nbgrader_meta
from autograder.nbgrader.sanitize import KEPT_MIME, is_clean, render_markdown

MARKER = "PWNED"
#: Where payloads phone home in the report (the discard port: nothing listens); the browser test watches its own.
BEACON = "http://127.0.0.1:9"


def _png(width: int = 8, height: int = 8) -> str:
    """A small orange PNG, base64 (the honest figure that must still show)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x80\x00" * width for _ in range(height))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return base64.b64encode(raw).decode()


PNG = _png()
HONEST_MARKDOWN = ("## My notes\n\nThe weights are $\\mathrm{softmax}(QK^\\top/\\sqrt{d_k})$, so each row sums to 1:\n\n"
                   "$$\\sum_j A_{ij} = 1$$\n\nH<sub>2</sub>O, **bold**, `code < 3` and a [link](https://arxiv.org/abs/1706.03762).")


def script(kind: str, beacon: str = BEACON, slashless: bool = False) -> str:
    """JavaScript that shows it ran: sets the title and calls the beacon (``slashless``: fit for a folder name)."""
    if slashless:
        parts = ", ".join(f"'{part}'" for part in f"{beacon}/{kind}".split("/"))
        return f"document.title='{MARKER}-{kind}';fetch([{parts}].join(String.fromCharCode(47)))"
    return f"document.title='{MARKER}-{kind}';fetch('{beacon}/{kind}')"


#: The scripts a payload kind carries besides its own: ``forged-output`` also adds a raw cell and an SVG attachment.
EXTRA_SCRIPTS = {"forged-output": ("raw-cell", "attachment")}


def payloads(beacon: str = BEACON) -> dict[str, dict]:
    """Every kind of browser payload, as what the submission holds.

    Returns
    -------
    dict
        kind → ``{"markdown": str}`` (a Markdown cell), ``{"code": str}`` (prepended to the
        softmax answer, runs at grading), or ``{"json": callable(nb)}`` (an edit of the notebook JSON).
    """
    def js(name):  # the script named for where it sits (a kind, or one of EXTRA_SCRIPTS)
        return script(name, beacon)

    def html_payload(kind):
        return f"<img src=x onerror=\"{js(kind)}\">"

    svg_payload = f"<svg xmlns='http://www.w3.org/2000/svg'><script>{js('svg')}</script></svg>"

    def forged_output(nb):
        cell = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "softmax")
        cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": f"<img src=x onerror=\"{js('forged-output')}\">",
            "application/javascript": js("forged-output"), "text/plain": "forged"})]
        nb.cells.insert(1, nbformat.v4.new_raw_cell(f"<img src=x onerror=\"{js('raw-cell')}\">"))
        svg = f"<svg xmlns='http://www.w3.org/2000/svg' onload=\"{js('attachment')}\"><script>{js('attachment')}</script></svg>"
        attached = nbformat.v4.new_markdown_cell("![figure](attachment:figure.svg)")
        attached.attachments = {"figure.svg": {"image/svg+xml": base64.b64encode(svg.encode()).decode()}}
        nb.cells.insert(1, attached)

    return {
        "markdown-html": {"markdown": f"<img src=x onerror=\"{js('markdown-html')}\">"},
        "link": {"markdown": f"[click me](javascript:{js('link')})"},
        "iframe": {"markdown": f"<iframe srcdoc=\"<script>parent.{js('iframe')}</script>\"></iframe>"
                               f"<form action='{beacon}/form'><input type=submit></form>"},
        "mermaid": {"markdown": f"```mermaid\n<img src=x onerror=\"{js('mermaid')}\">\n```"},
        "display-html": {"code": "from IPython.display import HTML, display\n"
                                 f"display(HTML({html_payload('display-html')!r}))"},
        "javascript": {"code": f"from IPython.display import Javascript, display\ndisplay(Javascript({js('javascript')!r}))"},
        "svg": {"code": "from IPython.display import SVG, display\n"
                        f"display(SVG({svg_payload!r}))"},
        "image-size": {"code": "from IPython.display import Image, display\nimport base64\n"
                               f"display(Image(base64.b64decode({PNG!r}), width={'4 onerror=' + js('image-size')!r}))"},
        "forged-output": {"json": forged_output},
    }


def scripts_of(kind: str) -> tuple[str, ...]:
    """The script kinds (``PWNED-<script kind>`` in :func:`script`) that payload ``kind`` of :func:`payloads` carries.

    Each carries its own, and those of :data:`EXTRA_SCRIPTS`. With every payload in one notebook, these say which
    cells hold which payload.
    """
    return (kind, *EXTRA_SCRIPTS.get(kind, ()))


def cell_text(cell) -> str:
    """All of a cell that a payload can be in: its JSON, with its attachments decoded (base64 hides the marker)."""
    decoded = []
    for bundle in (cell.get("attachments") or {}).values():
        for data in (bundle or {}).values():
            try:
                decoded.append(base64.b64decode(data).decode("utf-8", "replace"))
            except (ValueError, TypeError):
                decoded.append(str(data))
    return json.dumps(cell) + "".join(decoded)


def cells_carrying(nb, kind: str) -> list[int]:
    """Numbers (from 1) of the cells of ``nb`` that hold a script of payload ``kind`` (:func:`scripts_of`)."""
    return [number for number, cell in enumerate(nb.cells, 1) if carries(cell_text(cell), kind)]


def carries(text: str, kind: str) -> bool:
    """Whether ``text`` names a script of payload ``kind`` (``PWNED-svg``, not a longer kind's name)."""
    return any(re.search(re.escape(f"{MARKER}-{name}") + r"(?![\w-])", text) for name in scripts_of(kind))


def browser_submission(release_nb, beacon: str = BEACON, solutions: dict[str, str] | None = None,
                       kinds: dict[str, dict] | None = None):
    """The release filled with ``solutions``, carrying payloads (default: every kind), honest Markdown with LaTeX
    and a PNG figure."""
    from autograder.nbgrader.notebook_cells import fill_release

    kinds = payloads(beacon) if kinds is None else kinds
    code = "\n".join(p["code"] for p in kinds.values() if "code" in p)
    figure = f"from IPython.display import Image, display\nimport base64\ndisplay(Image(base64.b64decode('{PNG}')))"
    solutions = solutions or {}
    nb = fill_release(release_nb, {**solutions, "softmax": f"{code}\n{figure}\n{solutions.get('softmax', '')}"})
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(HONEST_MARKDOWN))
    for kind in kinds.values():
        if "markdown" in kind:
            nb.cells.insert(2, nbformat.v4.new_markdown_cell(kind["markdown"]))
    for kind in kinds.values():
        if "json" in kind:
            kind["json"](nb)
    return nb


class _Active(HTMLParser):
    """Finds what could run in a page: event handlers, javascript: URLs, frames and forms, the marker in scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._script = False

    def handle_starttag(self, tag, attrs):
        if tag in ("iframe", "frame", "object", "embed", "form", "svg", "base", "meta", "link") and any(
                MARKER in (v or "") or "srcdoc" == k for k, v in attrs):
            self.found.append(f"<{tag}>")
        if tag in ("iframe", "form", "object", "embed"):
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}={(value or '')[:60]}>")
            if value and value.strip().lower().startswith(("javascript:", "vbscript:", "data:text/html")):
                self.found.append(f"<{tag} {name}={value[:30]}…>")
            if value and MARKER in value:
                self.found.append(f"<{tag} {name}> carries the payload")
        self._script = tag == "script"

    def handle_endtag(self, tag):
        self._script = False

    def handle_data(self, data):
        if self._script and MARKER in data:
            self.found.append("a <script> with the payload")


def active_content(page: str) -> list[str]:
    """What in an HTML page could run a payload (empty when it is inert)."""
    return list(_active_content(page))


@functools.lru_cache(maxsize=64)
def _active_content(page: str) -> tuple[str, ...]:
    # the checks of the xss-<kind> cases read the one feedback page of the submission that carries every payload,
    # each kind and the report again: parsed once (the answer depends on the text alone)
    parser = _Active()
    parser.feed(page)
    parser.close()
    return tuple(parser.found)


@functools.lru_cache(maxsize=4096)
def _markdown_problem(source: str, attachments: str) -> str | None:
    """What is wrong with a Markdown cell rendered as nbconvert renders it (None: inert); ``attachments`` as JSON.

    Cached: the checks of the xss-<kind> cases each read the same stored notebook (nbconvert's render of a cell
    is most of their time), and the answer depends on the cell's text and attachments alone.
    """
    try:
        if not is_clean(render_markdown(source, json.loads(attachments))):
            return "Markdown that renders active HTML"
    except Exception as error:  # noqa: BLE001
        return f"Markdown nbconvert cannot render ({type(error).__name__})"
    return None


def stored_active_content(nb) -> list[str]:
    """What in a stored (autograded) notebook would render active in Formgrader or feedback."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type == "markdown":
            problem = _markdown_problem(cell.source, json.dumps(cell.get("attachments"), sort_keys=True))
            if problem:
                found.append(f"cell {number}: {problem}")
            for bundle in (cell.get("attachments") or {}).values():
                found += [f"cell {number}: a {mime} attachment" for mime in bundle if mime not in ("image/png", "image/jpeg")]
        for output in cell.get("outputs", []):
            for mime, value in output.get("data", {}).items():
                if mime not in KEPT_MIME:
                    found.append(f"cell {number}: a {mime} output")
                elif mime == "text/html" and not is_clean(value):
                    found.append(f"cell {number}: active text/html")
            for mime, meta in (output.get("metadata") or {}).items():
                if isinstance(meta, dict) and any(not isinstance(v, (int, float)) for k, v in meta.items()
                                                  if k in ("width", "height")):
                    found.append(f"cell {number}: a {mime} size that is not a number")
    return found


# ---- limits -------------------------------------------------------------------------------------------

def markdown_cells(count: int) -> list[dict]:
    """``count`` one-line Markdown cells as plain dicts, ready for ``json.dumps`` (not for nbformat's writer).

    300,000 of them take a fifth of the time :func:`nbformat.from_dict` takes to make them notebook nodes (2.5 s
    against 14.4 s on a loaded 2-core machine), in the test suite's graded class before any student is graded.

    Parameters
    ----------
    count : int
        How many cells (ids ``note-0`` … ``note-<count - 1>``).

    Returns
    -------
    list of dict
        The cells, in order, each ``{"cell_type": "markdown", "id", "metadata": {}, "source": "note <i>"}``.
    """
    return [{"cell_type": "markdown", "id": f"note-{i}", "metadata": {}, "source": f"note {i}"} for i in range(count)]


def many_markdown_cells(nb, count: int):
    """``nb`` with ``count`` extra one-line Markdown cells (the 300,000-cell notebook is 25 MB)."""
    # not new_markdown_cell: it validates each cell, minutes for 300,000
    nb.cells.extend(nbformat.from_dict(cell) for cell in markdown_cells(count))
    return nb


def many_outputs(nb, count: int):
    """``nb`` whose first code cell holds ``count`` stream outputs in its JSON."""
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = [nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": "."}) for _ in range(count)]
    return nb


def padded_to(nb, size: int) -> str:
    """The notebook's JSON padded (with a metadata string) to exactly ``size`` bytes."""
    nb = nbformat.from_dict(nb)
    nb.metadata["padding"] = ""
    text = nbformat.writes(nb)
    missing = size - len(text.encode())
    if missing < 0:
        raise ValueError(f"the notebook is already {len(text.encode())} bytes, more than {size}")
    nb.metadata["padding"] = "x" * missing
    text = nbformat.writes(nb)
    assert len(text.encode()) == size
    return text


# ---- nbgrader metadata edits --------------------------------------------------------------------------

def listed_metadata_edits(nb) -> None:
    """The edits the issue lists: rename a test cell's grade_id, drop points, make a test cell ungraded,
    add a fake manually graded cell and a cell with unknown nbgrader metadata."""
    tests = [c for c in nb.cells if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]
    tests[0].metadata.nbgrader["grade_id"] += "_renamed"
    tests[1].metadata.nbgrader.pop("points")
    tests[2].metadata.nbgrader["grade"] = False
    fake = nbformat.v4.new_markdown_cell("I deserve full marks.")
    fake.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": "bonus", "points": 100,
                                 "locked": False, "schema_version": 3}
    odd = nbformat.v4.new_code_cell("x = 1")
    odd.metadata["nbgrader"] = {"grade_id": "whatever", "mystery": [1, 2, 3]}
    nb.cells[1:1] = [fake, odd]


EDITS = [
    lambda meta, rng: meta.pop(rng.choice(sorted(meta) or ["grade_id"]), None),
    lambda meta, rng: meta.__setitem__("grade_id", meta.get("grade_id", "x") + rng.choice(["_2", "-copy", "Z"])),
    lambda meta, rng: meta.__setitem__("points", rng.choice([-1, 0, 1000, "ten", None, [1]])),
    lambda meta, rng: meta.__setitem__(rng.choice(["grade", "solution", "locked", "task"]), rng.choice([True, False, "yes"])),
    lambda meta, rng: meta.__setitem__("schema_version", rng.choice([1, 2, 99, "3"])),
    lambda meta, rng: meta.__setitem__("cell_type", rng.choice(["markdown", "raw", "code", 7])),
    lambda meta, rng: meta.__setitem__("checksum", "0" * 32),
]


def random_metadata_edits(nb, seed: int, per_cell: float = 0.5) -> list[str]:
    """Random edits (seeded) of the nbgrader metadata of every kind of cell, and cell-type flips; returns what."""
    rng = random.Random(seed)
    done = []
    for number, cell in enumerate(nb.cells, 1):
        meta = cell.metadata.get("nbgrader")
        if rng.random() > per_cell:
            continue
        if meta is None:
            if rng.random() < 0.3:  # an ordinary cell given invented metadata
                cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"invented{number}", "points": 5}
                done.append(f"cell {number}: invented metadata")
            continue
        if rng.random() < 0.2:
            cell.metadata["nbgrader"] = rng.choice([{}, "garbage", None, [1], {"grade_id": None}])
            done.append(f"cell {number}: metadata replaced")
            continue
        edit = rng.randrange(len(EDITS))
        EDITS[edit](meta, rng)
        done.append(f"cell {number}: edit {edit}")
    return done


def metadata_json(nb) -> str:
    """The notebook as JSON without nbformat's validation (edited metadata may not validate)."""
    return json.dumps(nb, indent=1)
