"""An explanation as terminal text: the document with its regions, kernels or matching words highlighted in ANSI
colours (or bracketed without colour), and the scores as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ckqti.explain_notes import closed_note, kernel_shade, region_note, rerank_notes
from ckqti.models.checkpoint import QTI_KINDS
from ckqti.terminal import readable, safe_cut, visible

if TYPE_CHECKING:
    from ckqti.explain import Explanation

RESET = "\x1b[0m"

REGION_COLOURS = ("\x1b[1;30;103m", "\x1b[1;30;106m", "\x1b[1;30;102m", "\x1b[1;30;105m")  # bold on yellow, cyan, ...

MATCH_COLOUR = "\x1b[1;4m"

UNREAD_COLOUR = "\x1b[2m"

#: 256-colour foregrounds of TK's kernels, from exact match (red) to opposite meaning (blue): one per
#: centre of TK_MUS (the page's KERNEL_HEX likewise).
KERNEL_COLOURS = (196, 202, 214, 226, 148, 250, 117, 75, 33, 27, 21)


def kernel_colour(mu: float) -> str:
    return f"\x1b[38;5;{KERNEL_COLOURS[kernel_shade(mu)]}m"


def paint(text: str, code: str, color: bool) -> str:
    """``text`` in colour ``code``, closed at the end of every line: a background left on at a line
    break fills the rest of the line (and of every line a terminal scrolls in) with it."""
    if not color:
        return text
    return "\n".join(f"{code}{line}{RESET}" if line else line for line in text.split("\n"))


Mark = tuple[int, int, str, str, str]  # char start, end, ANSI code, plain-text opening and closing


def marked_text(e: Explanation, marks: list[Mark], color: bool, elide: int = 400) -> str:
    """The document with marks (coloured, or bracketed without colour); long unmarked stretches elided."""
    out, pos = [], 0
    for start, end, code, opening, closing in sorted(marks):
        start = max(start, pos)  # marks that overlap (no model's regions do): text once
        if start >= end:
            continue
        out.append(_plain(e.text[pos:start], elide))
        inner = readable(e.text[start:end])
        out.append(paint(inner, code, color) if color else f"{opening}{inner}{closing}")
        pos = end
    cut = max(pos, e.unread_from)
    out.append(_plain(e.text[pos:cut], elide))
    if cut < len(e.text):
        tail = _plain(e.text[cut:], elide)
        out.append(paint(tail, UNREAD_COLOUR, color) if color else f"<<not read: {tail}>>")
    return "".join(out)


def _plain(text: str, elide: int) -> str:
    """Unmarked document text, long stretches elided, mojibake repaired and terminal controls
    escaped (:func:`readable`)."""
    if len(text) <= elide:
        return readable(text)
    head, tail = safe_cut(text, elide // 2), safe_cut(text, len(text) - elide // 2)  # not inside a letter + accent
    return f"{readable(text[:head])} [... {tail - head} characters ...] {readable(text[tail:])}"


def terminal_lines(e: Explanation, color: bool) -> list[str]:
    lines = [visible(line) for line in (  # text from the query and the document: no terminal controls
        f"query:    {e.query}",
        f"document: {e.docid}   model: {e.model_id}   score: {e.score:.4f}"
        + ("" if e.index_score is None else f"   (in the index: {e.index_score:.4f}, from quantized impacts)"),
        f"read {e.tokens_read} of {len(e.tokens)} document tokens; query tokens: {' '.join(e.query_tokens)}",
    )]
    if e.unknown:  # a QTI model scores the unknown id 0 (search skips the word); TK and TKL read it as a word
        how = "not scored, as search skips them" if e.kind in QTI_KINDS else "read as its unknown word"
        lines.append(visible(f"not in the model's vocabulary ({how}): {' '.join(e.unknown)}"))
    if e.query_tokens_cut:
        lines.append(f"the model reads {len(e.query_tokens)} query tokens; the last {e.query_tokens_cut} were not read")
    lines += [f"note: {note}" for note in rerank_notes(e)]
    if e.parts:
        lines.append("score = " + " + ".join(f"{name} {value:.4f}" for name, value in e.parts))
    lines.append("")
    if e.kind in ("tkl", "idcm"):
        lines += region_lines(e, color)
    elif e.kind == "tk" and e.kernels is not None:
        lines += kernel_lines(e, color)
    else:
        lines += term_lines(e, color)
    return lines


def region_lines(e: Explanation, color: bool) -> list[str]:
    what = ("TKL: topography score of each region" if e.kind == "tkl"
            else "IDCM: cross-encoder score (selector score) of each region")
    lines = [region_note(e), what]
    marks = []
    for r in e.regions:
        code = REGION_COLOURS[(r.rank - 1) % len(REGION_COLOURS)]
        extra = f" (selector {r.selector_score:.3f}{'' if r.used else ', not combined'})" if r.selector_score is not None else ""
        lines.append(f"  #{r.rank} tokens {r.token_start}-{r.token_end}  score {r.score:.4f}{extra}: "
                     f"{paint(readable(' '.join(e.region_text(r).split())), code, color)}")
        marks.append((r.char_start, r.char_end, code, f"[#{r.rank} ", "]"))
    return lines + ["", marked_text(e, marks, color)]


def kernel_lines(e: Explanation, color: bool) -> list[str]:
    k = e.kernels
    head = "term".ljust(16) + "".join(paint(f"{m:>8.1f}", kernel_colour(m), color) for m in k.mus)
    lines = ["TK: score share of each (query term, kernel mu); document words by closest kernel", head]
    for term, row in zip(e.query_tokens, k.cells):
        lines.append(visible(term[:15]).ljust(16) + "".join(f"{x:>8.3f}" for x in row))
    lines.append("total".ljust(16) + "".join(f"{x:>8.3f}" for x in np.sum(k.cells, axis=0)) if k.cells else "")
    marks = []
    for i, kern in enumerate(k.doc_kernels):
        if kern >= 0:
            t = e.tokens[i]
            marks.append((t.start, t.end, kernel_colour(k.mus[kern]), "", f"{{{k.mus[kern]:.1f}}}"))
    if not color:  # brackets for every word would drown the text: mark the close matches only
        marks = [m for m, kern in zip(marks, [x for x in k.doc_kernels if x >= 0]) if k.mus[kern] >= 0.7]
    return lines + ["", marked_text(e, marks, color)]


def term_lines(e: Explanation, color: bool) -> list[str]:
    lines = ["query term contributions s(t, d) (the score is their sum)"]
    top = max((abs(s) for s in e.term_scores), default=0.0) or 1.0
    for term, s in zip(e.query_tokens, e.term_scores):
        lines.append(f"  {visible(term[:20]):<20} {s:>9.4f}  {'#' * round(20 * abs(s) / top)}")
    if note := closed_note(e):
        lines.append(f"  ({note})")
    wanted = set(e.query_tokens)
    marks = [(t.start, t.end, MATCH_COLOUR, "[", "]") for t in e.tokens[: e.tokens_read] if t.token in wanted]
    return lines + ["", marked_text(e, marks, color)]
