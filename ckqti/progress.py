"""Progress bars drawn only where someone watches them: on a terminal (or in a notebook); a log
file or a pipe gets a plain line now and then instead.

A bar redraws its line with carriage returns; written to a log file or a pipe, every redraw
stays as text. Every bar of the package is made by :func:`progress_bar`, which keeps its
``show`` argument (the API's ``progress`` flags) and adds that test. A job written to a log
(``ckqti train ... > log``, a build under ``nohup``) said nothing until it ended, which looks like a
hang: there a bar becomes a :class:`LogLines`, a whole line every :data:`LOG_EVERY` seconds and
none for a shorter job.
"""

from __future__ import annotations

import sys
import time

from tqdm.std import tqdm as terminal_tqdm

LOG_EVERY = 60.0  # seconds between a log's progress lines (and before the first: short jobs write none)


class LogLines(terminal_tqdm):
    """A bar for a log file or a pipe: no carriage returns, a whole line at most every
    :data:`LOG_EVERY` seconds, none before the first interval, and none when it closes."""

    def __init__(self, *args, **kwargs):
        kwargs.update(mininterval=min(1.0, LOG_EVERY / 4), leave=False, ascii=True)  # the count kept current, lines rate-limited below
        self._next_line = time.monotonic() + LOG_EVERY
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        now = time.monotonic()  # set_postfix refreshes at every call (a training step): rate-limited here
        if msg == "" or now < self._next_line:  # closing clears a terminal's line: a log keeps its lines
            return False
        self._next_line = now + LOG_EVERY
        self.fp.write((msg or str(self)) + "\n")
        self.fp.flush()
        return True


class Hidden(terminal_tqdm):
    """A bar that draws nothing (``show=False``), with no monitor thread: tqdm starts one with a new
    bar when none runs, and only a drawn bar's close stops it (every API call made with
    ``progress=False`` left a ``tqdm_monitor`` thread behind, waking every 10 s)."""

    monitor_interval = 0


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
    output (``file``, default stderr) is a terminal, or in a notebook (its widget); shown to a log
    file or a pipe, :class:`LogLines`; not shown, disabled: iterating and ``update`` still work and
    draw nothing. ``kwargs`` are tqdm's."""
    if not show:
        return Hidden(iterable, disable=True, **kwargs)
    from tqdm.auto import tqdm

    in_notebook = sys.modules["tqdm.autonotebook"].tqdm is not terminal_tqdm  # tqdm.auto imported it
    if in_notebook or on_terminal(kwargs.get("file")):
        return tqdm(iterable, **kwargs)
    return LogLines(iterable, **kwargs)
