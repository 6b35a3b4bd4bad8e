"""Plain-text and markdown tables of aligned columns (the evaluation report's, the benchmark scripts')."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool = False) -> str:
    """Lay out string cells: first column left-aligned, the rest right-aligned; plain or markdown."""
    cells = [list(header), *(list(r) for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        padded = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:]))]
        return "| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip()

    out = [line(cells[0])]
    if markdown:
        out.append("|" + "|".join(["-" * (widths[0] + 2)] + ["-" * (w + 1) + ":" for w in widths[1:]]) + "|")
    out.extend(line(r) for r in cells[1:])
    return "\n".join(out)
