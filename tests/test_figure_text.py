"""Every figure comes with a text alternative: explorers name their picture by their summary line, static figures
are shown with a caption linked to the image (``plots.show_figure``), and sliders get their label as their name.

What the naming script does in the page is checked in Chromium by tests/test_accessibility_browser.py."""

import base64
import html
import re

import matplotlib
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from attention_lab.core import plots
from attention_lab.core.redraw import ACCESSIBLE_NAMES_JS, FIGURE_CLASS, SUMMARY_CLASS
from test_colour_contrast import EXPLORERS, memory_plot


@pytest.mark.parametrize("name", EXPLORERS)
def test_each_explorers_picture_and_summary_are_marked_for_the_naming_script(name):
    """ipywidgets offers no alt text: the page script names each picture by the summary in the same box."""
    explorer = EXPLORERS[name]()
    assert FIGURE_CLASS in explorer.image._dom_classes and SUMMARY_CLASS in explorer.summary._dom_classes
    box = explorer.widget
    assert explorer.image in box.children and explorer.summary in box.children  # the script looks in one box
    assert f"img.{FIGURE_CLASS}" in ACCESSIBLE_NAMES_JS and f".{SUMMARY_CLASS}" in ACCESSIBLE_NAMES_JS


def test_show_figure_shows_the_image_with_alt_text_and_a_linked_caption():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    plots.plot_attention_weights(np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None], ax=ax, title="causal, T = 4")
    InteractiveShell.instance()  # display() publishes through a shell
    with capture_output() as captured:
        plots.show_figure(fig, "Heatmap of causal weights: 0 above the diagonal & 1/(i+1) below.")
    (output,) = captured.outputs
    page = output.data["text/html"]
    assert output.data["text/plain"] == "Heatmap of causal weights: 0 above the diagonal & 1/(i+1) below."
    alt = re.search(r'<img [^>]*alt="([^"]*)"', page).group(1)
    assert html.unescape(alt) == "Figure: causal, T = 4"
    described = re.search(r'aria-describedby="([^"]+)"', page).group(1)
    caption = re.search(rf'<figcaption id="{described}">(.*?)</figcaption>', page).group(1)
    assert "0 above the diagonal &amp; 1/(i+1) below." in caption  # escaped, not markup
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1))
    assert png.startswith(b"\x89PNG")
    assert not plt.fignum_exists(fig.number), "the inline backend would show the figure again, without text"


def test_under_nbgrader_show_figure_prints_a_note_and_draws_nothing(monkeypatch):
    """No grade reads a figure: under nbgrader its PNG (most of its cost) is not rendered; without, it is shown."""
    fig, ax = plots.subplots(figsize=(3, 3))
    plots.plot_attention_weights(np.eye(3), ax=ax, title="identity")
    rendered = []
    monkeypatch.setattr(type(fig), "savefig", lambda self, *args, **kwargs: rendered.append(self))
    InteractiveShell.instance()
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with capture_output() as captured:
        plots.show_figure(fig, "The identity's weights.")
    assert captured.stdout == "(the figure is not drawn while grading)\n"
    assert captured.outputs == [] and rendered == []
    with pytest.raises(ValueError, match="description must be a non-empty text"):
        plots.show_figure(fig, " ")  # the same refusal as outside grading
    monkeypatch.delenv("NBGRADER_EXECUTION")
    with capture_output() as captured:
        plots.show_figure(fig, "The identity's weights.")
    assert captured.stdout == "" and rendered == [fig]
    (output,) = captured.outputs
    assert output.data["text/html"].startswith("<figure><img ")


def test_the_memory_plot_is_shown_with_its_measurements_in_words():
    figure, description = memory_plot()
    assert figure.axes[0].get_xlabel().startswith("T") and "from T = 256 to 512" in description
    assert "Full attention:" in description and "slope" in description and "tiles of 128 × 128" in description
    assert "2 GiB" in description and "20,000" in description


@pytest.mark.parametrize("description", ["", "   ", None])
def test_a_figure_without_a_description_is_refused(description):
    with pytest.raises(ValueError, match="description must be a non-empty text"):
        plots.figure_html(matplotlib.figure.Figure(), description)


def test_an_explorer_displays_the_slider_labelling_script_with_its_widget():
    explorer = EXPLORERS["masking"]()
    InteractiveShell.instance()
    with capture_output() as captured:
        explorer._ipython_display_()
    kinds = [sorted(output.data) for output in captured.outputs]
    assert any("application/vnd.jupyter.widget-view+json" in kind for kind in kinds)
    scripts = [output.data["application/javascript"] for output in captured.outputs
               if "application/javascript" in output.data]
    assert scripts == [ACCESSIBLE_NAMES_JS]
    assert "aria-label" in ACCESSIBLE_NAMES_JS and ".widget-label" in ACCESSIBLE_NAMES_JS
