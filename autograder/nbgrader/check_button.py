"""The "Check my work" button of the start page: ``make check`` from inside JupyterLab, without a terminal.

:func:`check_button` is an ipywidgets button (and a choice of assignment) on ``notebooks/00_start_here.ipynb``
— a self-study page, never part of ``release/``. A click runs the same function as ``make check``,
:func:`autograder.nbgrader.self_check.check`, and shows its report: the per-step table with the known
mistakes named, and a link to each feedback file, which JupyterLab opens in its HTML viewer.

The check runs in a fresh Python process (:func:`check_in_fresh_process`): the grader forks a child per
notebook, which is safe only from a process without threads, and a kernel has several.
"""

from __future__ import annotations

import html
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable

from autograder.nbgrader import self_check

WAIT = ("Checking {what} with the hidden tests… The first check of an assignment takes about a minute; "
        "checking it again after a change takes seconds.")


def course_folder(start: Path | None = None) -> Path:
    """The course folder that holds ``start`` (default: the kernel's working directory, ``notebooks/``).

    Raises
    ------
    FileNotFoundError
        If no folder from ``start`` up holds ``nbgrader_config.py`` and ``source/``.
    """
    start = Path(start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "nbgrader_config.py").is_file() and (folder / "source").is_dir():
            return folder
    raise FileNotFoundError(f"no course folder (nbgrader_config.py and source/) holds {start}")


def check_in_fresh_process(course_dir: Path, assignment_ids: list[str] | None = None) -> self_check.CheckReport:
    """:func:`autograder.nbgrader.self_check.check` in a new Python process (spawned, not forked); its report."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(self_check.check, course_dir, assignment_ids, False).result()


def report_html(report: self_check.CheckReport, relative_to: Path) -> str:
    """The report as HTML for the notebook: the text ``make check`` prints, and links to the feedback files.

    Parameters
    ----------
    report : CheckReport
        What :func:`~autograder.nbgrader.self_check.check` returned.
    relative_to : Path
        The folder of the notebook that shows it: links are relative to it, so that JupyterLab opens them.
    """
    links = [f'<li><a href="{html.escape(os.path.relpath(c.feedback, relative_to))}">feedback on {html.escape(c.assignment)}</a>'
             f" ({html.escape(self_check.relative_path(c.feedback, report.course_dir))})</li>"
             for c in report.checks if c.feedback is not None]
    page = [f'<pre class="attention-lab-check">{html.escape(report.text())}</pre>']
    if links:
        page.append(f"<p>Open the feedback (each hidden case, what passed and failed, the hints):</p><ul>{''.join(links)}</ul>")
    return "\n".join(page)


def check_button(course_dir: Path | None = None,
                 run: Callable[[Path, list[str] | None], self_check.CheckReport] = check_in_fresh_process):
    """The "Check my work" widget: an assignment choice, the button, and the report below them.

    Parameters
    ----------
    course_dir : Path, optional
        The learner's course folder (default: :func:`course_folder` of the kernel's working directory).
    run : callable, optional
        ``run(course_dir, assignment_ids) -> CheckReport``; default :func:`check_in_fresh_process`.

    Returns
    -------
    ipywidgets.VBox
        ``children[0]`` holds the assignment choice and the button, ``children[1]`` is the output area.
    """
    import ipywidgets as widgets
    from IPython.display import HTML

    course_dir = Path(course_dir) if course_dir is not None else course_folder()
    here = Path.cwd()
    names = sorted(p.name for p in (course_dir / "source").iterdir() if p.is_dir())
    choice = widgets.Dropdown(options=[("every assignment in workspace/", "")] + [(n, n) for n in names],
                              description="Assignment", style={"description_width": "initial"})
    button = widgets.Button(description="Check my work", icon="check", button_style="primary",
                            tooltip="Grade your workspace/ notebooks with the hidden tests (as `make check` does)")
    output = widgets.Output()

    def show(page: str) -> None:  # outputs set directly: the callback runs outside any cell's output capture
        output.outputs = ()
        output.append_display_data(HTML(page))

    def clicked(_):
        button.disabled = True
        show(f"<p>{html.escape(WAIT.format(what=choice.value or 'your notebooks'))}</p>")
        try:
            report = run(course_dir, [choice.value] if choice.value else None)
        except Exception as error:  # noqa: BLE001 — the learner reads why, in one line, where they clicked
            show(f"<pre>check stopped: {html.escape(' '.join(str(error).split()))}</pre>")
        else:
            show(report_html(report, here))
        finally:
            button.disabled = False

    button.on_click(clicked)
    return widgets.VBox([widgets.HBox([choice, button]), output])
