"""Lines the commands print: :func:`echo` of text made safe, and the notes several commands share."""

from __future__ import annotations

import click

from ckqti.terminal import counted, visible


def echo(text: str, err: bool = False) -> None:
    """``click.echo`` of a line that may hold document text, ids or paths: what would act on the
    terminal (escape sequences, carriage returns, bidirectional overrides) is written as escapes."""
    click.echo(visible(text), err=err)


def repeated_note(repeated: int | None, orcas) -> None:
    """Say how many lines of the ORCAS file repeated a query their document already held (dropped:
    a click counts once, :func:`indexer.readers.load_orcas`)."""
    from indexer.readers import repeated_clicks_note

    if note := repeated_clicks_note(repeated or 0, orcas):
        echo(f"note: {note}", err=True)


def count_queries(n: int) -> str:
    """``1 query``, ``3 queries``."""
    return counted(n, "query", "queries")


def skipped_reasons(skipped, reasons: dict[str, str], shown: int = 3) -> str:
    """The first ``shown`` skipped queries with their reasons, for a one-line note."""
    return "; ".join(f"{q}: {reasons.get(q, '?')}" for q in skipped[:shown]) + ("; ..." if len(skipped) > shown else "")
