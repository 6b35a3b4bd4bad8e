"""Lines the commands print: :func:`echo` of text made safe, :func:`note` of what is no result nor error (silenced by
``-q/--quiet``), and the notes several commands share."""

from __future__ import annotations

import click

from ckqti.cli.options import quiet
from ckqti.terminal import counted, visible


def echo(text: str, err: bool = False) -> None:
    """``click.echo`` of a line that may hold document text, ids or paths: what would act on the
    terminal (escape sequences, carriage returns, bidirectional overrides) is written as escapes."""
    click.echo(visible(text), err=err)


def note(text: str) -> None:
    """A line on stderr that is neither a result nor an error (``note: ...``, ``wrote FILE``): :func:`echo`'d, unless
    the command was given ``-q/--quiet`` (:func:`ckqti.cli.options.quiet`)."""
    if not quiet():
        echo(text, err=True)


def repeated_note(repeated: int | None, orcas) -> None:
    """Say how many lines of the ORCAS file repeated a query their document already held (dropped:
    a click counts once, :func:`indexer.readers.load_orcas`)."""
    from indexer.readers import repeated_clicks_note

    if text := repeated_clicks_note(repeated or 0, orcas):
        note(f"note: {text}")


def count_queries(n: int) -> str:
    """``1 query``, ``3 queries``."""
    return counted(n, "query", "queries")


def skipped_reasons(skipped, reasons: dict[str, str], shown: int = 3) -> str:
    """The first ``shown`` skipped queries with their reasons, for a one-line note."""
    return "; ".join(f"{q}: {reasons.get(q, '?')}" for q in skipped[:shown]) + ("; ..." if len(skipped) > shown else "")
