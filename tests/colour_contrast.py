"""Lightness contrast of the colours a figure uses, in normal vision and under simulated colour-vision deficiency.

Colours that carry meaning (blocked vs allowed cells, the entries of a legend, the two ends of a colour bar) must
differ by at least :data:`MIN_DELTA_L` in CIELAB lightness L*, so that they stay apart in greyscale, in print, and
for readers with a colour-vision deficiency. Deficiencies are simulated with ``colorspacious``' ``sRGB1+CVD``
space (Machado, Oliveira & Fernandes 2009, "A physiologically-based model for simulation of color vision
deficiency", IEEE TVCG 15(6)) at full severity.

Everything is read from the figure's matplotlib artists after it was drawn (legend handles, mappables, image
arrays), never from a copy of the plotting code's constants.
"""

from __future__ import annotations

import itertools

import numpy as np
from colorspacious import cspace_convert
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

MIN_DELTA_L = 20.0
#: Normal vision and the three dichromacies (full severity).
VISIONS = (None, "protanomaly", "deuteranomaly", "tritanomaly")


def lightness(rgb, vision: str | None = None) -> np.ndarray:
    """CIELAB L* (0 black … 100 white) of sRGB colours in [0, 1], shape (n, 3) or (n, 4), as seen with ``vision``."""
    rgb = np.clip(np.atleast_2d(np.asarray(rgb, dtype=float))[:, :3], 0.0, 1.0)
    if vision is not None:
        rgb = np.clip(cspace_convert(rgb, {"name": "sRGB1+CVD", "cvd_type": vision, "severity": 100}, "sRGB1"),
                      0.0, 1.0)
    return cspace_convert(rgb, "sRGB1", "CIELab")[:, 0]


def smallest_difference(first, second) -> tuple[float, str]:
    """The smallest |ΔL*| between any colour of ``first`` and any of ``second`` over :data:`VISIONS`, and that vision."""
    worst, where = np.inf, ""
    for vision in VISIONS:
        a, b = lightness(first, vision), lightness(second, vision)
        delta = float(np.min(np.abs(a[:, None] - b[None, :])))
        if delta < worst:
            worst, where = delta, vision or "normal vision"
    return worst, where


def unique_colours(rgba: np.ndarray) -> np.ndarray:
    """The distinct RGB colours of an (…, 3 or 4) array, rounded to 8 bits."""
    rgb = np.round(np.asarray(rgba, dtype=float).reshape(-1, np.shape(rgba)[-1])[:, :3] * 255) / 255
    return np.unique(rgb, axis=0)


def legends(figure: Figure) -> list:
    """Every legend of the figure: the figure's own and each Axes'."""
    found = list(figure.legends)
    found += [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    return found


def _handle_colour_and_style(handle) -> tuple[tuple, tuple]:
    if isinstance(handle, Line2D):
        colour = handle.get_color() if handle.get_linestyle() not in ("None", "none", "") else handle.get_markeredgecolor()
        return to_rgba(colour)[:3], (handle.get_linestyle(), handle.get_linewidth(), handle.get_marker(),
                                     handle.get_markerfacecolor() == "none")
    return to_rgba(handle.get_facecolor())[:3], ("patch", getattr(handle, "get_hatch", lambda: None)())


def legend_problems(figure: Figure) -> list[str]:
    """Pairs of entries of one legend that a reader without colour could not tell apart.

    Two entries of different colours must differ by :data:`MIN_DELTA_L` in L*; two entries of the same colour
    are the same series drawn twice and must differ in line style, width or marker.
    """
    problems = []
    for legend in legends(figure):
        entries = [(text.get_text(), *_handle_colour_and_style(handle))
                   for text, handle in zip(legend.get_texts(), legend.legend_handles)]
        for (name_a, colour_a, style_a), (name_b, colour_b, style_b) in itertools.combinations(entries, 2):
            if np.allclose(colour_a, colour_b, atol=1 / 255):
                if style_a == style_b:
                    problems.append(f"{name_a!r} and {name_b!r}: same colour and the same style")
                continue
            delta, vision = smallest_difference([colour_a], [colour_b])
            if delta < MIN_DELTA_L:
                problems.append(f"{name_a!r} and {name_b!r}: ΔL* {delta:.1f} ({vision})")
    return problems


def mappables(figure: Figure, extra=()) -> list:
    """The colour-mapped artists of the figure (2-D images, scatter plots coloured by value) and ``extra`` ones."""
    found = list(extra)
    for ax in figure.axes:
        for artist in [*ax.get_images(), *ax.collections]:
            array = artist.get_array()
            if array is not None and np.ndim(array) in (1, 2) and artist.get_cmap() is not None:
                found.append(artist)
    return found


def colour_bar_ends(mappable) -> np.ndarray:
    """The colours of the two ends of a mappable's colour range (its clim through its norm and colour map)."""
    low, high = mappable.get_clim()
    return mappable.to_rgba(np.array([low, high], dtype=float))


def colour_bar_problems(figure: Figure, extra=()) -> list[str]:
    """Colour-mapped artists whose two ends differ by less than :data:`MIN_DELTA_L` in L*."""
    problems, seen = [], set()
    for mappable in mappables(figure, extra):
        key = (mappable.get_cmap().name, *mappable.get_clim())
        if key in seen:  # a colour bar's own solids repeat its image's map and range
            continue
        seen.add(key)
        low, high = colour_bar_ends(mappable)
        delta, vision = smallest_difference([low], [high])
        if delta < MIN_DELTA_L:
            problems.append(f"{mappable.get_cmap().name} from {mappable.get_clim()[0]:g} to "
                            f"{mappable.get_clim()[1]:g}: ends ΔL* {delta:.1f} ({vision})")
    return problems
