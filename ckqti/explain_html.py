"""A self-contained HTML page of an :class:`~ckqti.explain.Explanation` (inline CSS, no script, no link).

The document text is written once, with the model's findings as elements a program can read
back (the tests parse them):

* TKL / IDCM regions: ``<mark class="region region-N" id="region-N" data-rank data-token-start
  data-token-end data-char-start data-char-end data-score>``, plus a table of the regions;
* TK: every document word read as ``<span class="w kI" data-kernel="I" data-mu="MU">`` coloured
  by its closest kernel, and the (query term x kernel) score table;
* NDRM: exact query-term matches as ``<mark class="match" data-term>``, and a table of each
  query term's contribution.

Text the model did not read (beyond its document cap) is wrapped in ``<span class="unread">``.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.explain_notes import closed_note, kernel_shade, region_note, rerank_notes
from ckqti.files import replacing
from ckqti.terminal import counted, readable

if TYPE_CHECKING:
    from ckqti.explain import Explanation


def shown(text: str) -> str:
    """Text for the page: HTML-escaped, mojibake repaired, and its control and bidirectional
    characters written as escapes (``\\x1b``, ``\\u202e``), as the terminal report shows them
    (:func:`ckqti.terminal.readable`): a query or a document cannot reorder what the page shows."""
    return escape(readable(text))


#: Kernel colours from exact match (mu = 1, red) through 0 (grey) to opposite meaning (blue), one per centre
#: of TK_MUS: a kernel takes its mu's (:func:`ckqti.explain_notes.kernel_shade`), as in the terminal.
KERNEL_HEX = ("#d7191c", "#f46d43", "#fdae61", "#fee08b", "#d9ef8b", "#bdbdbd", "#abd9e9", "#74add1", "#4575b4",
              "#313695", "#1d1f6b")
REGION_HEX = ("#ffe066", "#8ce99a", "#74c0fc", "#e599f7")

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
code { background: #f1f3f5; padding: 0 .2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
td, th { border: 1px solid #dee2e6; padding: .2em .5em; text-align: right; }
td.term, th.term { text-align: left; }
.doc { line-height: 1.7; white-space: pre-wrap; border: 1px solid #dee2e6; padding: 1em; }
.doc, td.term { overflow-wrap: anywhere; }
mark.region { padding: .1em 0; border-radius: .2em; }
mark.region::before { content: attr(data-rank); font-size: .7em; vertical-align: super; font-weight: bold; }
mark.match { background: #ffd8a8; font-weight: bold; }
.unread { color: #adb5bd; }
.bar { background: #4dabf7; height: .8em; }
.bar.neg { background: #ff8787; }
.legend span { padding: 0 .4em; margin-right: .2em; }
"""


def explanation_html(e: "Explanation") -> str:
    """The whole page as a string."""
    if e.kind in ("tkl", "idcm"):
        summary, marks = region_summary(e), region_marks(e)
    elif e.kind == "tk" and e.kernels is not None:
        summary, marks = kernel_summary(e), kernel_marks(e)
    else:
        summary, marks = term_summary(e), match_marks(e)
    read = f"The model read {e.tokens_read} of the document's {counted(len(e.tokens), 'token')}."
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ckqti explain: {shown(e.docid)}</title>",
        f"<style>{CSS}</style></head><body>",
        f'<h1>Why <code>{escape(e.model_id)}</code> scored <code id="docid">{shown(e.docid)}</code> '
        f'<span id="score" data-score="{e.score!r}">{e.score:.4f}</span></h1>',
        f'<p>Query: <q id="query">{shown(e.query)}</q> (model tokens: <code>{escape(" ".join(e.query_tokens))}</code>)</p>',
        "" if e.index_score is None else (f'<p>In the index, from its quantized impacts, search scores it <span id="index-score" '
                                          f'data-score="{e.index_score!r}">{e.index_score:.4f}</span>.</p>'),
        f"<p>{read}</p>",
        "".join(f'<p class="rerank-note">Note: {escape(note)}.</p>' for note in rerank_notes(e)),
        parts_html(e),
        summary,
        "<h2>Document</h2>",
        f'<div class="doc">{marked_html(e, marks)}</div>',
        "</body></html>",
    ])


Mark = tuple[int, int, str]  # char start, end, opening tag (the closing tag is derived from it)


def parts_html(e: "Explanation") -> str:
    """The score's parts (a model combining channels), or nothing."""
    if not e.parts:
        return ""
    cells = " + ".join(f'{escape(name)} <span class="part" data-part="{escape(name)}" data-value="{value!r}">'
                       f"{value:.4f}</span>" for name, value in e.parts)
    return f'<p id="parts">Score = {cells}</p>'


def marked_html(e: "Explanation", marks: list[Mark]) -> str:
    """The escaped document text with the marks and the unread tail wrapped; where marks overlap, the
    text is shown once, in the mark that starts first."""
    out, pos = [], 0
    for start, end, opening in sorted(marks):
        start = max(start, pos)
        if start >= end:
            continue
        out.append(shown(e.text[pos:start]))
        name = opening[1:].split(" ", 1)[0].rstrip(">")
        out.append(f"{opening}{shown(e.text[start:end])}</{name}>")
        pos = end
    cut = max(pos, e.unread_from)
    out.append(shown(e.text[pos:cut]))
    if cut < len(e.text):
        out.append(f'<span class="unread" title="beyond the model\'s document cap">{shown(e.text[cut:])}</span>')
    return "".join(out)


def region_marks(e: "Explanation") -> list[Mark]:
    marks = []
    for r in e.regions:
        colour = REGION_HEX[(r.rank - 1) % len(REGION_HEX)]
        opening = (f'<mark class="region region-{r.rank}" id="region-{r.rank}" data-rank="{r.rank}" '
                   f'data-token-start="{r.token_start}" data-token-end="{r.token_end}" '
                   f'data-char-start="{r.char_start}" data-char-end="{r.char_end}" data-score="{r.score!r}" '
                   f'style="background: {colour}">')
        marks.append((r.char_start, r.char_end, opening))
    return marks


def region_summary(e: "Explanation") -> str:
    note = escape(region_note(e), quote=False)
    if e.kind == "tkl":
        head = "<tr><th>region</th><th>tokens</th><th>topography score</th><th class=term>text</th></tr>"
    else:
        head = ("<tr><th>region</th><th>tokens</th><th>cross-encoder</th><th>selector</th><th>combined</th>"
                "<th class=term>text</th></tr>")
    rows = []
    for r in e.regions:
        extra = "" if e.kind == "tkl" else f"<td>{r.selector_score:.4f}</td><td>{'yes' if r.used else 'no'}</td>"
        text = shown(e.region_text(r))
        rows.append(f'<tr class="region-row" data-rank="{r.rank}"><td><a href="#region-{r.rank}">#{r.rank}</a></td>'
                    f"<td>{r.token_start}&ndash;{r.token_end}</td><td>{r.score:.4f}</td>{extra}"
                    f'<td class="term">{text}</td></tr>')
    return f"<h2>Top regions</h2><p>{note}</p><table>{head}{''.join(rows)}</table>"


def kernel_hex(mu: float) -> str:
    return KERNEL_HEX[kernel_shade(mu)]


def kernel_marks(e: "Explanation") -> list[Mark]:
    k = e.kernels
    marks = []
    for i, kern in enumerate(k.doc_kernels):
        if kern < 0:
            continue
        t = e.tokens[i]
        colour = kernel_hex(k.mus[kern])
        opening = (f'<span class="w k{kern}" data-kernel="{kern}" data-mu="{k.mus[kern]:.1f}" data-token="{i}" '
                   f'title="closest kernel mu={k.mus[kern]:.1f}" style="color: {colour}">')
        marks.append((t.start, t.end, opening))
    return marks


def _cell(value: float, top: float) -> str:
    alpha = min(1.0, abs(value) / top) if top > 0 else 0.0
    rgb = "215,25,28" if value >= 0 else "69,117,180"
    return f'<td style="background: rgba({rgb},{alpha * 0.8:.2f})">{value:.3f}</td>'


def kernel_summary(e: "Explanation") -> str:
    k = e.kernels
    top = max((abs(x) for row in k.cells for x in row), default=0.0)
    head = "<tr><th class=term>query term \\ kernel mu</th>" + "".join(
        f'<th style="color: {kernel_hex(m)}">{m:.1f}</th>' for m in k.mus) + "</tr>"
    rows = [f'<tr data-term="{escape(t)}"><td class="term">{escape(t)}</td>{"".join(_cell(x, top) for x in row)}</tr>'
            for t, row in zip(e.query_tokens, k.cells)]
    legend = "".join(f'<span style="background: {kernel_hex(m)}">{m:.1f}</span>' for m in k.mus)
    note = ("Each cell is that (query term, kernel)'s share of the score (log and length-normalised branches "
            "through their dense layers); the cells sum to the score (with an explicit channel, to its kernels' "
            "part). Document words are coloured by the kernel "
            "closest to their cosine with their best-matching query term (seed paper 004, Fig. 2).")
    return (f"<h2>Kernel scores</h2><p>{note}</p><table class=kernels>{head}{''.join(rows)}</table>"
            f'<p class="legend">kernel mu: {legend}</p>')


def match_marks(e: "Explanation") -> list[Mark]:
    wanted = set(e.query_tokens)
    return [(t.start, t.end, f'<mark class="match" data-term="{escape(t.token)}">')
            for t in e.tokens[: e.tokens_read] if t.token in wanted]


def term_summary(e: "Explanation") -> str:
    top = max((abs(s) for s in e.term_scores), default=0.0) or 1.0
    rows = []
    for t, s in zip(e.query_tokens, e.term_scores):
        width = 100.0 * abs(s) / top
        bar = "bar neg" if s < 0 else "bar"
        rows.append(f'<tr data-term="{escape(t)}" data-score="{s!r}"><td class="term">{escape(t)}</td><td>{s:.4f}</td>'
                    f'<td style="width: 12em"><div class="{bar}" style="width: {width:.1f}%"></div></td></tr>')

    note = closed_note(e)
    return ("<h2>Query term contributions</h2><p>Under query term independence the score is the sum of each "
            "query term's score s(t, d). Exact matches are marked in the document.</p>"
            f"<table><tr><th class=term>term</th><th>s(t, d)</th><th></th></tr>{''.join(rows)}</table>"
            + (f'<p class="closed">{escape(note)}</p>' if note else ""))


PAGE_MARK = b"<title>ckqti explain:"  # in the head of every page explain_html writes


def replaceable_page(path: Path) -> bool:
    """``path`` is new, empty, or an earlier explanation page."""
    if not path.exists():
        return True
    with open(path, "rb") as f:
        head = f.read(256)
    return not head or PAGE_MARK in head


def write_page(path: Path, html: str) -> None:
    """Write ``html`` whole or not at all (a temporary file renamed into place); text that is not
    Unicode (a lone surrogate from undecodable bytes) becomes '?'."""
    with replacing(path) as tmp:
        tmp.write_bytes(html.encode("utf-8", "replace"))
