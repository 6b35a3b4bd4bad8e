"""Progress bars drawn only where someone watches them: on a terminal (or in a notebook).

A bar redraws its line with carriage returns; written to a log file or a pipe, every redraw
stays as text. Every bar of the package is made by :func:`progress_bar`, which keeps its
``show`` argument (the API's ``progress`` flags) and adds that test.
"""

from __future__ import annotations

import sys


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: the current ``sys.stderr``) is a terminal; a closed or
    replaced stream without ``isatty`` is not."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def progress_bar(iterable=None, *, show: bool = True, **kwargs):
    """A ``tqdm.auto`` bar over ``iterable`` (or updated by hand), drawn when ``show`` and its
    output (``file``, default stderr) is a terminal, or in a notebook (its widget); otherwise
    disabled: iterating and ``update`` still work and draw nothing. ``kwargs`` are tqdm's."""
    from tqdm.auto import tqdm
    from tqdm.std import tqdm as terminal_tqdm

    in_notebook = sys.modules["tqdm.autonotebook"].tqdm is not terminal_tqdm  # tqdm.auto imported it
    draw = bool(show) and (in_notebook or on_terminal(kwargs.get("file")))
    return tqdm(iterable, disable=not draw, **kwargs)
