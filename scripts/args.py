"""Command-line types the scripts share: a count is an integer >= 1, a list names known items.

A bad value stops a script at parsing with argparse's usage message, before any work and
before anything is written (a negative step count used to write negative throughputs).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def names_from(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """argparse type: a comma-separated list of ``choices`` (any case), in ``choices``' spelling."""
    by_lower = {c.lower(): c for c in choices}

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n.lower() not in by_lower]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"expected names from {', '.join(choices)}, got {text!r}")
        return [by_lower[n.lower()] for n in names]

    return parse
