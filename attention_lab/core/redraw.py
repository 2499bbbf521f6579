"""Widget plumbing shared by the interactive visuals: coalesced redraws and figures shown as PNG images.

Every explorer keeps one Agg figure, draws it into a canvas and shows the
canvas as an ``ipywidgets.Image``. :class:`CoalescedRedraw` holds the change
handling all of them share and :func:`png_bytes` / :func:`image_widget` the
encoding and the image widget.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

# Redraws only run when a control changes, so this delay is the longest a change waits; it is long enough for a
# slider drag's burst of values to arrive in one redraw and short enough not to be noticed.
COALESCE_SECONDS = 0.005


class CoalescedRedraw:
    """Mixin for a widget that redraws itself when any of its controls change.

    Dragging a slider sends a burst of values, and a redraw (the learner's
    functions, then encoding a PNG) takes longer than the gap between them.
    Redrawing for each value would queue stale pictures and leave the widget
    lagging behind the mouse, so changes that arrive while a redraw is pending
    are coalesced into that one redraw, which then shows the latest values.

    Subclasses implement :meth:`redraw`, set ``sync`` and ``widget`` in
    ``__init__`` and observe their controls with :meth:`_on_change`.

    Attributes
    ----------
    sync : bool
        Redraw inside each change handler (tests) instead of coalescing
        changes that arrive while a redraw is pending (interactive use).
    widget : ipywidgets.Widget
        What the notebook displays.
    """

    sync: bool = False
    _pending: asyncio.TimerHandle | None = None
    _drawn: asyncio.Future | None = None  # done when the pending redraw has run
    _adjusting: bool = False

    def redraw(self) -> None:
        """Recompute for the current controls and update the widget in place."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _adjusting_controls(self):
        """Mute :meth:`_on_change` while one control's handler moves others, so one change makes one redraw."""
        self._adjusting = True
        try:
            yield
        finally:
            self._adjusting = False

    def _on_change(self, _change) -> None:
        if self._adjusting:
            return
        if self.sync:
            self.redraw()
            return
        if self._pending is not None:  # later changes before the redraw runs are merged into it
            return
        try:
            # ipykernel's loop, or in the browser Pyodide's WebLoop (its call_later is a JavaScript setTimeout)
            loop = asyncio.get_running_loop()
            self._pending = loop.call_later(COALESCE_SECONDS, self._flush)
            self._drawn = loop.create_future()
        except (RuntimeError, NotImplementedError):
            # no running loop (a plain script) or one that cannot schedule timers: nothing would run a deferred
            # redraw, so redraw now — every change is shown, none is lost
            if self._pending is not None:  # a timer was scheduled, but the loop has no futures to await it with
                self._pending.cancel()
            self._pending, self._drawn = None, None
            self.redraw()

    def _flush(self) -> None:
        self._pending = None
        try:
            self.redraw()
        finally:
            drawn, self._drawn = self._drawn, None
            if drawn is not None and not drawn.done():
                drawn.set_result(None)

    async def drawn(self) -> None:
        """Wait until the redraw pending for earlier changes has run; return at once when none is pending.

        For code (and tests) that changes controls inside a running event loop and then reads the picture.
        """
        if self._drawn is not None:
            await self._drawn

    def _ipython_display_(self):
        from IPython.display import Javascript, display

        display(self.widget)
        display(Javascript(ACCESSIBLE_NAMES_JS))


#: DOM classes of an explorer's picture and of its summary line (public ``add_class``), for :data:`ACCESSIBLE_NAMES_JS`.
FIGURE_CLASS = "attention-lab-figure"
SUMMARY_CLASS = "attention-lab-summary"

#: Gives what ipywidgets 8 draws without an accessible name one (jupyter-widgets/ipywidgets#2650, open: no trait
#: sets ARIA attributes, and an Image's ``tooltip`` breaks its view, which reads a ``description`` it lacks):
#: every slider's handle (role="slider") is named after its description label, so that a screen reader says
#: "T, slider, 8" instead of "slider, 8" (axe-core: aria-input-field-name); every explorer picture's ``alt`` is
#: the text of the summary line under it, kept in step at each redraw (axe-core: image-alt). Runs once per page
#: and keeps naming what is drawn later (a redraw, a re-run cell, another explorer).
ACCESSIBLE_NAMES_JS = """(() => {
  const words = el => (el.innerText || el.textContent || '').replace(/\\s+/g, ' ').trim();
  const name = () => {
    for (const slider of document.querySelectorAll('.widget-slider')) {
      const label = slider.querySelector('.widget-label');
      for (const handle of slider.querySelectorAll('.noUi-handle[role="slider"]')) {
        const text = label ? words(label) : '';
        if (text && handle.getAttribute('aria-label') !== text) handle.setAttribute('aria-label', text);
      }
    }
    for (const image of document.querySelectorAll('img.%(figure)s')) {
      const box = image.closest('.widget-vbox');
      const summary = box ? box.querySelector('.%(summary)s') : null;
      const text = summary ? words(summary) : '';
      if (text && image.getAttribute('alt') !== text) image.setAttribute('alt', text);
    }
  };
  name();
  if (!window.attentionLabNames) {
    window.attentionLabNames = new MutationObserver(name);
    window.attentionLabNames.observe(document.body, {childList: true, subtree: true, characterData: true});
  }
})();""" % {"figure": FIGURE_CLASS, "summary": SUMMARY_CLASS}


def name_figure(image, summary) -> None:
    """Mark an explorer's image widget and its summary ``HTML`` widget so that the image is named by the summary."""
    image.add_class(FIGURE_CLASS)
    summary.add_class(SUMMARY_CLASS)


def png_bytes(canvas: FigureCanvasAgg) -> bytes:
    """Encode what is drawn on an Agg canvas as PNG bytes for an ``ipywidgets.Image``.

    Written here with :mod:`zlib` instead of Pillow's encoder, which tries five
    filters on every row: at 1200 × 360 pixels that costs 12 ms of each redraw,
    this 6 ms, for a file a few percent larger (PNG specification, 3rd ed.,
    sections 5 and 7: rows with filter type 0, one zlib stream in one IDAT chunk).

    Parameters
    ----------
    canvas : FigureCanvasAgg
        A canvas that has been drawn (or blitted) already.

    Returns
    -------
    bytes
        An 8-bit RGB PNG; the figures are opaque, so the alpha channel is dropped.
    """
    rgba = np.asarray(canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # each row: filter type 0, then R G B per pixel
    rows[:, 1:].reshape(height, width, 3)[...] = rgba[..., :3]
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, deflate, no interlace
    # The fastest compression: the image is shown once and replaced at the next redraw, so size matters less.
    return b"".join((PNG_SIGNATURE, _png_chunk(b"IHDR", header), _png_chunk(b"IDAT", zlib.compress(rows.data, 1)),
                     _png_chunk(b"IEND", b"")))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def image_widget(width_px: float):
    """An empty ``ipywidgets.Image`` for PNG bytes, ``width_px`` pixels wide.

    Parameters
    ----------
    width_px : float
        Display width, the figure's width in inches times its dpi.

    Returns
    -------
    ipywidgets.Image
    """
    import ipywidgets as widgets

    return widgets.Image(format="png", layout=widgets.Layout(width=f"{width_px:.0f}px"))
