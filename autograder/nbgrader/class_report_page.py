"""The class report as one HTML page that needs no script: tables, and plots as PNG embedded in it.

:func:`render` turns a :class:`autograder.nbgrader.class_report.ClassReport` into a self-contained page (one
file to mail or put on a course site): no ``<script>``, no event handler, no external resource; the plots are
PNGs drawn with Matplotlib's Agg backend and embedded as ``data:image/png`` URLs. Every text that comes from
learners (student ids, notes with their error messages or outputs) or from the gradebook goes through Jinja2's
autoescaping, so a hostile student id or output is shown as text and can inject no markup.
"""

from __future__ import annotations

import base64
import io

import jinja2
import matplotlib

matplotlib.use("Agg")  # the report is drawn off-screen, whatever the caller's backend
import matplotlib.pyplot as plt  # noqa: E402

from autograder.nbgrader.class_report import BANDS, ClassReport  # noqa: E402
from autograder.nbgrader.grading import score_text  # noqa: E402

#: How many named mistakes the bar chart shows (the table lists them all).
CHART_MISTAKES = 12

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Class report: {{ r.assignment }}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.manual { background: #fff3cd; }
.note { font-size: 0.9em; color: #444; max-width: 30rem; overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; }
img { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>Class report: {{ r.assignment }}</h1>
<p>Course <code>{{ r.course_id }}</code>. {{ r.results|length }} submission(s): {{ r.graded|length }} graded,
{{ r.failures|length }} not graded. Report made {{ r.generated }} by grader <code id="grader-version">{{ r.grader }}</code>.</p>
{% if r.graded_by %}<p>Graded by:
{% for label, count in r.graded_by.items() %}<code>{{ label }}</code> ({{ count }} student{{ "s" if count != 1 }}){{ "; " if not loop.last }}{% endfor %}.</p>{% endif %}

<h2 id="re-teach">What to re-teach</h2>
{% if r.frequent %}
<p>The known mistakes the grader named, by how many students made them, each with the hint the learners read.</p>
<img id="mistakes-chart" src="{{ mistakes_png }}" alt="Bar chart: students per named mistake">
<table id="frequent-mistakes">
<tr><th>mistake</th><th>students</th><th>step(s)</th><th>what it is</th><th>hint</th></tr>
{% for m in r.frequent %}<tr><td><code>{{ m.key }}</code></td><td class="num">{{ m.count }} of {{ r.graded|length }}</td>
<td>{{ m.steps|join(", ") }}</td><td>{{ m.description }}</td><td>{{ m.hint }}</td></tr>
{% endfor %}</table>
{% else %}<p>No known mistake was named in this class.</p>{% endif %}

<h2 id="steps">Scores per step</h2>
{% if r.graded %}<img id="steps-chart" src="{{ steps_png }}" alt="Bar charts: students per score band, one per step">{% endif %}
<table id="step-scores">
<tr><th>step</th><th>points</th><th>graded</th><th>mean</th><th>median</th>{% for band in bands %}<th>{{ band }}</th>{% endfor %}</tr>
{% for s in r.steps %}<tr><td>{{ s.title }}</td><td class="num">{{ num(s.max_score) }}</td><td class="num">{{ s.scores|length }}</td>
<td class="num">{{ num(s.mean) }}</td><td class="num">{{ num(s.median) }}</td>{% for count in s.bands.values() %}<td class="num">{{ count }}</td>{% endfor %}</tr>
{% endfor %}</table>

<h2 id="not-graded">Not graded</h2>
{% if r.failures %}<table id="failures"><tr><th>student</th><th>why</th></tr>
{% for f in r.failures %}<tr><td><code>{{ f.student }}</code></td><td class="note">{{ f.note.removeprefix("not graded: ") }}</td></tr>
{% endfor %}</table>{% else %}<p>Every submission was graded.</p>{% endif %}

<h2 id="manual">Manual scores</h2>
{% if r.overrides %}<p>Scores given by hand in Formgrader; they replace the autograder's, which is shown beside them.</p>
<table id="overrides"><tr><th>student</th><th>step</th><th>manual score</th><th>autograder's score</th></tr>
{% for o in r.overrides %}<tr class="manual"><td><code>{{ o.student }}</code></td><td>{{ o.step }}</td>
<td class="num">{{ num(o.manual) }}/{{ num(o.max_score) }} (manual)</td><td class="num">{{ num(o.autograder) }}/{{ num(o.max_score) }}</td></tr>
{% endfor %}</table>{% else %}<p>No manual scores: every score is the autograder's.</p>{% endif %}

<h2 id="students">Students</h2>
<table id="student-scores"><tr><th>student</th>{% for s in r.steps %}<th>{{ s.title }}</th>{% endfor %}<th>total</th><th>mistakes</th><th>notes</th></tr>
{% for x in r.results %}<tr><td><code>{{ x.student }}</code></td>
{% if x.steps is none %}{% for s in r.steps %}<td>–</td>{% endfor %}<td>not graded</td><td></td>
{% else %}{% for s in r.steps %}{% set got = x.steps[s.grade_id] %}<td class="num{{ ' manual' if s.grade_id in x.manual }}">{{ num(got[0]) }}/{{ num(got[1]) }}{{ " (manual)" if s.grade_id in x.manual }}</td>{% endfor %}
<td class="num">{{ num(x.total) }}/{{ num(r.max_total) }}</td><td>{% for key in x.named %}<code>{{ key }}</code>{{ ", " if not loop.last }}{% endfor %}</td>{% endif %}
<td class="note">{{ x.note }}</td></tr>
{% endfor %}</table>

<h2 id="legend">Legend of mistake keys</h2>
<table id="mistake-legend"><tr><th>key</th><th>description</th><th>hint</th><th>step(s)</th></tr>
{% for m in r.legend %}<tr><td><code>{{ m.key }}</code></td><td>{{ m.description }}</td><td>{{ m.hint }}</td><td>{{ m.steps|join(", ") }}</td></tr>
{% endfor %}</table>
<p>Same numbers as CSV beside this page: <code>steps.csv</code>, <code>mistakes.csv</code>, <code>students.csv</code>.</p>
</body>
</html>
"""

_ENVIRONMENT = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)


def _num(value: float | None) -> str:
    return "–" if value is None else score_text(value)


def _png(figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URL (and closed)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def steps_chart(report: ClassReport) -> str:
    """One small bar chart per step: how many graded students scored 0, below half, half or more, full marks."""
    count = max(1, len(report.steps))
    columns = min(3, count)
    rows = -(-count // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    labels = [label for label, _ in BANDS]
    for ax, step in zip(axes.flat, report.steps):
        ax.bar(range(len(labels)), list(step.bands.values()), color=["#c0392b", "#e67e22", "#f1c40f", "#27ae60"])
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(f"{step.title} ({score_text(step.max_score)} points)", fontsize=9)
        ax.set_ylabel("students")
        ax.yaxis.get_major_locator().set_params(integer=True)
    for ax in list(axes.flat)[len(report.steps):]:
        ax.set_visible(False)
    figure.tight_layout()
    return _png(figure)


def mistakes_chart(report: ClassReport) -> str:
    """Horizontal bars: students per named mistake, the most frequent on top (at most :data:`CHART_MISTAKES`)."""
    shown = report.frequent[:CHART_MISTAKES]
    figure, ax = plt.subplots(figsize=(7, 0.45 * len(shown) + 1.0))
    ax.barh(range(len(shown)), [m.count for m in shown], color="#2c7fb8")
    ax.set_yticks(range(len(shown)), [m.key for m in shown], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(f"students (of {len(report.graded)} graded)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Named mistakes")
    figure.tight_layout()
    return _png(figure)


def render(report: ClassReport) -> str:
    """The report as a self-contained HTML page (see the module docstring)."""
    return _ENVIRONMENT.from_string(_TEMPLATE).render(
        r=report, num=_num, bands=[label for label, _ in BANDS],
        steps_png=steps_chart(report) if report.graded else "",
        mistakes_png=mistakes_chart(report) if report.frequent else "")
