"""Command-line types the scripts share, and the wrapper that runs a script's ``main``.

A count is an integer >= 1, a list names known items, a number is finite, an input file exists
and an output path can be written. A bad value stops a script at parsing with argparse's usage
message (exit status 2), before any work and before anything is written (a negative step count
used to write negative throughputs; an output path below a regular file failed after the whole
run). :func:`run` turns the errors a user can cause later on (ckqti's own, and the operating
system's: a file that went missing, a permission) into one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's layout and ends each option's help with its default, unless the
    help already speaks of it or there is none to show (None, False). Options without help show
    nothing: give each one a help text."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS or "default" in text.lower()):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {value}")
    return value


def int_range(least: int, most: int) -> Callable[[str], int]:
    """argparse type: an integer in ``[least, most]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(f"expected an integer from {least} to {most}, got {text!r}")
        return value

    return parse


def _finite(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (not nan, not inf)."""
    value = _finite(text, "a finite number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """argparse type: a finite number in (0, 1]."""
    value = _finite(text, "a number in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def comma_list(item: Callable[[str], T], allow_empty: bool = False) -> Callable[[str], list[T]]:
    """argparse type: a comma-separated list of ``item`` values (blanks around commas ignored). An
    empty list (``""``) only with ``allow_empty``; a bad item is refused with ``item``'s message."""

    def parse(text: str) -> list[T]:
        parts = [p.strip() for p in text.split(",")]
        if parts == [""] and allow_empty:
            return []
        if "" in parts:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        out = []
        for part in parts:
            try:
                out.append(item(part))
            except argparse.ArgumentTypeError as err:
                raise argparse.ArgumentTypeError(f"{err} (in {text!r})" if len(parts) > 1 else str(err)) from None
        return out

    return parse


positive_ints = comma_list(positive_int)
"""argparse type: a comma-separated list of integers >= 1 (at least one)."""

positive_floats = comma_list(positive_float)
"""argparse type: a comma-separated list of finite numbers > 0 (at least one)."""


def names_from(choices: Sequence[str], allow_empty: bool = False) -> Callable[[str], list[str]]:
    """argparse type: a comma-separated list of ``choices`` (any case), in ``choices``' spelling;
    ``""`` (no names) only with ``allow_empty``."""
    by_lower = {c.lower(): c for c in choices}

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names and allow_empty and not text.strip():
            return []
        unknown = [n for n in names if n.lower() not in by_lower]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"expected names from {', '.join(choices)}, got {text!r}")
        return [by_lower[n.lower()] for n in names]

    return parse


def _path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return Path(text)


def existing_file(text: str) -> Path:
    """argparse type: a path to a file that exists."""
    path = _path(text)
    if not path.is_file():
        why = "is a directory, not a file" if path.is_dir() else "no such file"
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return path


def existing_dir(text: str) -> Path:
    """argparse type: a path to a directory that exists."""
    path = _path(text)
    if not path.is_dir():
        why = "is a file, not a directory" if path.exists() else "no such directory"
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return path


def file_or_names(names: Iterable[str]) -> Callable[[str], str]:
    """argparse type: one of ``names`` (a model such as ``ndrm2``) or the path of an existing file
    (a checkpoint); the text is kept as given."""
    names = tuple(names)

    def parse(text: str) -> str:
        if text in names or Path(text).is_file():
            return text
        raise argparse.ArgumentTypeError(f"expected {', '.join(names)} or an existing file, got {text!r}")

    return parse


def _check_writable_below(path: Path, text: str) -> None:
    """The deepest existing folder above ``path`` must be a folder this process may write in."""
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {above} is not a directory")
    if not os.access(above, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: {above} is not writable")


def output_file(text: str) -> Path:
    """argparse type: a file to write: not a directory, below folders that exist or can be made
    (no regular file in the way, the deepest existing one writable). Nothing is created."""
    path = _path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file to write")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: not writable")
    _check_writable_below(path, text)
    return path


def output_dir(text: str) -> Path:
    """argparse type: a folder to write in: an existing directory, or one that can be made (no
    regular file in the way, the deepest existing folder writable). Nothing is created."""
    path = _path(text)
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: is a file, not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text}: not writable")
        return path
    _check_writable_below(path, text)
    return path


def torch_device(text: str) -> str:
    """argparse type: a torch device this machine has (``cpu``, ``cuda``, ``cuda:1``); refuses
    names torch does not know and CUDA where there is none."""
    from ckqti.errors import CkqtiError
    from ckqti.models.loading import pick_device

    if not text:
        raise argparse.ArgumentTypeError("expected a torch device (cpu, cuda, cuda:1), got ''")
    try:
        pick_device(text)
    except CkqtiError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def usable_devices(parser: argparse.ArgumentParser, names: Sequence[str], option: str = "--devices") -> list:
    """torch devices of ``names`` (from ``cpu``, ``cuda``), CUDA left out where there is none; a usage
    error (``parser.error``) when that leaves none."""
    import torch

    out = [torch.device(n) for n in dict.fromkeys(names) if n != "cuda" or torch.cuda.is_available()]
    if not out:
        parser.error(f"{option}: CUDA is not available here, so nothing is left to measure (add cpu)")
    return out


REPOSITORY = Path(__file__).resolve().parents[1]


def shown(path: str | Path) -> str:
    """``path`` relative to the repository root, as a results JSON records it (results stay
    comparable across checkouts; the shared data reads ``../shared/data/...``)."""
    return os.path.relpath(Path(path).resolve(), REPOSITORY)


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """The command as run, for a report: ``python scripts/<script> ARGS``, quoted for a shell (an
    argument with a space or quote stays one argument when the line is run again). ``ARGS`` is
    ``argv``, or this process's arguments when ``argv`` is None."""
    return shlex.join(["python", f"scripts/{script}", *(sys.argv[1:] if argv is None else argv)])


def error_message(err: BaseException) -> str:
    """One line for a user-facing error: ckqti's message, or an OS error's file and reason."""
    if isinstance(err, OSError) and err.strerror:
        files = [str(f) for f in (err.filename, err.filename2) if f is not None]
        return f"{' -> '.join(files)}: {err.strerror}" if files else err.strerror
    return " ".join(str(err).split()) or type(err).__name__


def run(main: Callable[[], int | None], prog: str | None = None) -> int:
    """``main()``'s exit status (None: 0), for ``sys.exit(run(main))`` under ``if __name__ ==
    "__main__":``. A :class:`ckqti.errors.CkqtiError` or an ``OSError`` (a missing file, a path
    below a regular file, a permission) becomes ``<prog>: error: <message>`` on stderr and status 1
    instead of a traceback; any other exception is a bug and keeps its traceback."""
    from ckqti.errors import CkqtiError

    try:
        code = main()
    except (CkqtiError, OSError) as err:
        print(f"{prog or Path(sys.argv[0]).name}: error: {error_message(err)}", file=sys.stderr)
        return 1
    return 0 if code is None else code
