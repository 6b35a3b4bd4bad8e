"""Why a model scored a document as it did: regions, kernels or query-term contributions.

:func:`explain` loads a checkpoint of any kind, finds the document (in a corpus file or an
index's document store) and returns an :class:`Explanation`:

* **TKL and IDCM**: the top regions with their token spans (in the model's tokens: analyzed
  terms for TKL, WordPiece for IDCM), character spans in the document text, and scores. TKL's
  regions are its ``regions`` picked saturation windows (by default 3, of ``saturation_window`` = 30
  terms; the score combines each pick with its ``neighbours`` on each side, by default 2, by learned
  weights); IDCM's are the ``sample_n`` windows its selector sent to the cross-encoder (``window``-token
  centres, by default 50; the cross-encoder also read ``overlap`` tokens on each side, by default 7),
  with the cross-encoder score, the selector score, and whether the score is among the ``top_k``
  combined into the document score. The notes on them name the model's own settings
  (:attr:`Explanation.settings`).
* **TK**: per query term and kernel, that cell's share of the score (log and length branches
  through their dense layers; the cells sum to the score), and for every document word the
  model read, its closest kernel to its best-matching query term (seed paper 004, Fig. 2).
* A TK or TKL with an explicit channel (``explicit=True``) also reports the score's parts: the
  kernels' or the regions' share, NDRM2's explicit share and the constant of their combination
  (:attr:`Explanation.parts`); TK's cells then sum to the kernels' part (the kernel score times its weight).
* **NDRM1-3**: each query term's contribution ``s(t, d)`` (the score is their sum), and the
  document words that match a query term exactly.

:meth:`Explanation.render_terminal` highlights in ANSI colours (by default when standard
output is a terminal and ``NO_COLOR`` is unset or empty; :mod:`ckqti.explain_terminal`);
:meth:`Explanation.to_html` writes a self-contained HTML page (:mod:`ckqti.explain_html`); both say
the same notes (:mod:`ckqti.explain_notes`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ckqti.errors import InputError, QueryError
from ckqti.explain_html import replaceable_page, write_page
from ckqti.files import check_folder_of
from ckqti.json_form import json_ready
from ckqti.models.checkpoint import QTI_KINDS
from ckqti.models.inputs import TokenSpan
from ckqti.models.reranker import Reranker

if TYPE_CHECKING:
    from indexer.readers.corpus import Orcas
    from retriever.index import Index


@dataclass(frozen=True)
class Region:
    """One region of a document the model singled out.

    Attributes:
        rank: 1 for the best region.
        token_start, token_end: the region's model tokens ``[start, end)`` in the document.
        char_start, char_end: the characters ``text[char_start:char_end]`` those tokens cover.
        score: TKL: the window's topography score; IDCM: the cross-encoder's window score.
        selector_score: IDCM: the selector's window score (None for TKL).
        used: whether the region's score went into the document score (IDCM: among ``top_k``).
    """

    rank: int
    token_start: int
    token_end: int
    char_start: int
    char_end: int
    score: float
    selector_score: float | None = None
    used: bool = True


@dataclass(frozen=True)
class KernelView:
    """TK's per-kernel, per-query-term scores and the closest kernel of each document word read.

    Attributes:
        mus: kernel centres.
        cells: ``[Q][K]`` each cell's share of the kernels' score (they sum to the score, or with an explicit
            channel to the kernels' part of :attr:`Explanation.parts`).
        soft_tf: ``[Q][K]`` kernel activations summed over the document (soft term frequencies).
        doc_kernels: closest kernel index of each document token read (its best-matching query term).
    """

    mus: tuple[float, ...]
    cells: tuple[tuple[float, ...], ...]
    soft_tf: tuple[tuple[float, ...], ...]
    doc_kernels: tuple[int, ...]


@dataclass(frozen=True)
class Explanation:
    """A model's account of one (query, document) score.

    Attributes:
        kind, model_id: the model.
        query, docid, text: the inputs (``text``: title and text as the model read them).
        score: the model's score.
        query_tokens: the query's model tokens (as read, after the query cap).
        tokens: the document's model tokens with character spans (all of them).
        tokens_read: how many of them the model read (its document cap).
        regions: TKL / IDCM regions, best first.
        kernels: TK's kernel view.
        term_scores: NDRM: each query token's contribution (aligned with ``query_tokens``).
        parts: ``(name, value)`` pairs that sum to the score, for a model combining channels (TK or
            TKL with an explicit channel); empty otherwise.
        unknown: query tokens the model's vocabulary lacks: TK and TKL read them as their one unknown word;
            an NDRM model scores them 0 (:attr:`term_scores`), as search skips them.
        query_tokens_cut: query tokens past the model's query cap, not read.
        index_score: explained from the index the model built, the score search gives the document
            (from its quantized impacts: close to :attr:`score`, up to the quantization); ``None`` otherwise.
        settings: TKL / IDCM: the model's settings that shape its regions (:data:`REGION_SETTINGS`),
            which the notes on them name; empty otherwise.
        closed_score: an NDRM model with a latent gate: what a query term the document neither holds
            nor comes near adds (NDRM3: its combination's constant; NDRM1: 0), the same for every
            such document, so it ranks none above another; ``None`` otherwise.
        repeated_clicks: lines of the ORCAS file dropped as a query their document already held
            (:func:`indexer.readers.load_orcas`); ``ckqti explain`` notes them as ``ckqti index`` does.
        ranked_last: the model reads no word it knows in the document (empty, only stopwords or unknown
            words): ``ckqti rerank`` ranks it below every document it reads, not by :attr:`score`
            (:func:`retriever.rerank_scoring.rerank_candidates`).
        rerank_skips: why ``ckqti rerank`` skips the query and ranks no document for it
            (:meth:`~ckqti.models.reranker.Reranker.unreadable`: no word the model knows), or ``None``.
    """

    kind: str
    model_id: str
    query: str
    docid: str
    text: str
    score: float
    query_tokens: tuple[str, ...]
    tokens: tuple[TokenSpan, ...]
    tokens_read: int
    regions: tuple[Region, ...] = ()
    kernels: KernelView | None = None
    term_scores: tuple[float, ...] = field(default_factory=tuple)
    parts: tuple[tuple[str, float], ...] = ()
    unknown: tuple[str, ...] = ()
    query_tokens_cut: int = 0
    index_score: float | None = None
    settings: dict[str, int] = field(default_factory=dict)
    closed_score: float | None = None
    repeated_clicks: int = 0
    ranked_last: bool = False
    rerank_skips: str | None = None

    @property
    def unread_from(self) -> int:
        """Character where the text the model did not read begins (the first token past its cap)."""
        return self.tokens[self.tokens_read].start if self.tokens_read < len(self.tokens) else len(self.text)

    def region_text(self, region: Region) -> str:
        return self.text[region.char_start: region.char_end]

    def to_dict(self) -> dict:
        """The fields, JSON-ready (what ``ckqti explain --json`` prints): ``tokens`` as ``[token, start, end]``,
        tuples as lists, and a score that is not a finite number (a checkpoint whose weights are NaN) as None."""
        d = asdict(self)
        d["tokens"] = [[t.token, t.start, t.end] for t in self.tokens]
        return json_ready(d)

    def to_html(self) -> str:
        from ckqti.explain_html import explanation_html

        return explanation_html(self)

    def render_terminal(self, color: bool | None = None) -> str:
        """A plain-text report; ANSI colours when ``color`` (default: stdout is a tty and ``NO_COLOR`` unset or
        empty, as no-color.org has it)."""
        from ckqti.explain_terminal import terminal_lines

        if color is None:
            color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        return "\n".join(terminal_lines(self, color))


# -- computing explanations -------------------------------------------------------------------


def char_span(tokens: tuple[TokenSpan, ...], start: int, end: int) -> tuple[int, int]:
    """Characters covered by tokens ``[start, end)`` (``end`` clipped to the tokens that exist)."""
    end = min(end, len(tokens))
    if start >= end:
        return 0, 0
    return tokens[start].start, tokens[end - 1].end


def _tensors(reranker: Reranker, query_ids: np.ndarray, doc_ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.as_tensor(query_ids, dtype=torch.long)[None].to(reranker.device)
    d = torch.as_tensor(doc_ids, dtype=torch.long)[None].to(reranker.device)
    if d.shape[1] == 0:
        d = torch.zeros(1, 1, dtype=torch.long, device=reranker.device)
    return q, d


def combined_parts(reranker: Reranker, name: str, own: float, explicit: torch.Tensor | None) -> tuple[tuple[str, float], ...]:
    """A TK's or TKL's score as ``a * own + b * explicit + c`` when it has an explicit channel, else ``()``."""
    combiner = getattr(reranker.model, "combiner", None)
    if combiner is None or explicit is None:
        return ()
    a, b, c = combiner.combination()
    return ((name, a * own), ("explicit (NDRM2)", b * float(explicit[0])), ("constant", c))


#: The config fields of a TKL or IDCM that :func:`ckqti.explain_notes.region_note` names.
REGION_SETTINGS = {"tkl": ("saturation_window", "saturation_stride", "regions", "neighbours"),
                   "idcm": ("window", "overlap", "sample_n", "top_k")}


def tkl_regions(reranker: Reranker, q: torch.Tensor, d: torch.Tensor,
                tokens: tuple[TokenSpan, ...]) -> tuple[float, list[Region], tuple[tuple[str, float], ...]]:
    e = reranker.model.explain(q, d)
    n = int(e.doc_lengths[0])
    regions = []
    for r in range(e.region_starts.shape[1]):
        if not bool(e.region_valid[0, r]):
            continue
        s = int(e.region_starts[0, r])
        end = min(s + e.region_length, n)
        regions.append(Region(len(regions) + 1, s, end, *char_span(tokens, s, end), float(e.region_scores[0, r])))
    return float(e.score[0]), regions, combined_parts(reranker, "regions", float(e.region_score[0]), e.explicit_score)


def idcm_regions(reranker: Reranker, q: torch.Tensor, d: torch.Tensor, tokens: tuple[TokenSpan, ...]) -> tuple[float, list[Region]]:
    e = reranker.model.explain(q, d)
    rows = []
    for j in range(e.selected.shape[1]):
        w = int(e.selected[0, j])
        if w < 0:
            continue
        s, end = (int(x) for x in e.spans[0, j])
        rows.append((float(e.cross_scores[0, j]), s, end, float(e.selector_scores[0, w]), bool(e.used[0, j])))
    rows.sort(key=lambda r: (-r[0], r[1]))
    regions = [Region(i + 1, s, end, *char_span(tokens, s, end), c, sel, used)
               for i, (c, s, end, sel, used) in enumerate(rows)]
    return float(e.score[0]), regions


def tk_kernels(reranker: Reranker, q: torch.Tensor, d: torch.Tensor) -> tuple[float, KernelView, tuple[tuple[str, float], ...]]:
    e = reranker.model.explain(q, d)
    n = int(e.doc_mask[0].sum())
    qn = int(e.query_mask[0].sum())

    def rows(t: torch.Tensor) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(float(x) for x in row) for row in t[0, :qn])

    parts = combined_parts(reranker, "kernels", float(e.kernel_score[0]), e.explicit_score)
    share = reranker.model.combiner.combination()[0] if parts else 1.0  # the cells sum to the kernels' part
    view = KernelView(tuple(float(m) for m in e.kernel_mus), rows(e.term_kernel_scores * share), rows(e.kernel_sums),
                      tuple(int(k) for k in e.doc_term_kernel[0, :n]))
    return float(e.score[0]), view, parts


def ndrm_terms(reranker: Reranker, q: torch.Tensor, d: torch.Tensor, length: int) -> tuple[float, tuple[float, ...]]:
    """Each query token's ``s(t, d)`` (0 for a word the model does not know) and their sum: each
    distinct term scored once, as :meth:`ckqti.models.reranker.Reranker.score_ids` does."""
    ids = q[0].cpu().numpy()
    terms, at = np.unique(ids, return_inverse=True)
    lengths = torch.tensor([float(length)], device=reranker.device)
    scores = reranker.model.term_scores(torch.as_tensor(terms[None], device=reranker.device), d, lengths)[0]  # [T]
    per_token = np.where(ids > 1, scores.double().cpu().numpy()[at], 0.0)
    return float(per_token.sum()), tuple(float(x) for x in per_token)


def explain_text(reranker: Reranker, query: str, docid: str, text: str) -> Explanation:
    """Explain ``reranker``'s score of a document ``text`` for ``query``."""
    if not isinstance(query, str):
        raise QueryError(f"a query is a string, got {type(query).__name__}")
    all_query_tokens = tuple(t.token for t in reranker.text.spans(query))
    if not all_query_tokens:
        raise QueryError(f"query {query!r} has no terms the model reads (empty, or only stopwords)")
    tokens = tuple(reranker.text.spans(text))
    query_ids = reranker.query_ids(query)
    if why := reranker.over_cap(query_ids):
        raise QueryError(why)
    doc_ids = reranker.doc_ids(text)
    q, d = _tensors(reranker, query_ids, doc_ids)
    query_tokens = all_query_tokens[: None if reranker.kind in QTI_KINDS else reranker.max_query_length]
    read = min(len(tokens), reranker.max_doc_length)
    vocab = getattr(reranker.text, "vocab", None)  # WordPiece (IDCM) has no unknown words to name
    unknown = tuple(dict.fromkeys(t for t in query_tokens if vocab is not None and t not in vocab))
    base = dict(kind=reranker.kind, model_id=reranker.model_id, query=query, docid=docid, text=text,
                query_tokens=query_tokens, tokens=tokens, tokens_read=read, unknown=unknown,
                query_tokens_cut=len(all_query_tokens) - len(query_tokens),
                ranked_last=not reranker.reads(doc_ids), rerank_skips=reranker.unreadable(query_ids))
    settings = {name: int(getattr(reranker.model.config, name)) for name in REGION_SETTINGS.get(reranker.kind, ())}
    with torch.no_grad():
        if reranker.kind == "tkl":
            score, regions, parts = tkl_regions(reranker, q, d, tokens)
            return Explanation(score=score, regions=tuple(regions), parts=parts, settings=settings, **base)
        if reranker.kind == "idcm":
            score, regions = idcm_regions(reranker, q, d, tokens)
            return Explanation(score=score, regions=tuple(regions), settings=settings, **base)
        if reranker.kind == "tk":
            score, view, parts = tk_kernels(reranker, q, d)
            return Explanation(score=score, kernels=view, parts=parts, **base)
        if reranker.kind in QTI_KINDS:
            score, terms = ndrm_terms(reranker, q, d, len(tokens))
            gated = getattr(reranker.model, "gate_threshold", None) is not None  # NDRM1, NDRM3 with a latent gate
            closed = reranker.model.closed_pair_score() if gated else None
            return Explanation(score=score, term_scores=terms, closed_score=closed, **base)
    raise InputError(f"cannot explain a {reranker.kind!r} model")


def find_document(docid: str, corpus: str | Path, fmt: str | None = None, orcas: Orcas | None = None) -> str:
    """The text of ``docid`` from a corpus file (its fields joined, its ``orcas`` clicks first as an
    index built with them reads them). An index's is its document store's (:func:`locate_document`,
    :meth:`retriever.index.Shard.indexed_text`: every field the index read)."""
    from indexer.readers import read_corpus

    for doc in read_corpus(corpus, fmt=fmt, orcas=orcas):
        if doc.docid == docid:
            return doc.full_text()
    raise InputError(f"document {docid!r} is not in the corpus", corpus)


def locate_document(index: Index, docid: str) -> tuple[int, int]:
    """``(shard, row)`` of ``docid`` in ``index``.

    Raises:
        InputError: no shard holds it.
    """
    where = index.locate(docid)
    if where is None:
        raise InputError(f"document {docid!r} is not in the index", index.path)
    return where


def open_explainer(model: str | Path, corpus: str | Path | None, index: str | Path | Index | None, fmt: str | None,
                   device: str | None, max_doc_length: int | None, adapt_vocabulary: bool,
                   orcas: Orcas | None = None) -> Reranker:
    """The model as :func:`explain` reads with it (:func:`retriever.rerank_model.open_reranker`): a
    checkpoint with its training vocabulary, or adapted to the corpus's or the index's (see
    :func:`explain`'s ``adapt_vocabulary``; IDCM is read as trained), or an untrained NDRM2
    (``"ndrm2"``, ``"ndrm2-anserini"``) on the collection's statistics (a corpus's with ``orcas``'s clicks)."""
    from retriever.rerank_model import open_reranker

    collection = index if index is not None else corpus
    if adapt_vocabulary:  # TK, TKL and NDRM read the collection's vocabulary
        return open_reranker(model, device, max_doc_length, collection, fmt, ("tk", "tkl", *QTI_KINDS), orcas)
    if index is not None:  # an NDRM model reads the index's: its score is the index's
        return open_reranker(model, device, max_doc_length, index, fmt, QTI_KINDS)
    return open_reranker(model, device, max_doc_length, collection, fmt, (), orcas)  # untrained NDRM2 only


def explain(
    query: str,
    docid: str,
    model_path: str | Path,
    corpus: str | Path | None = None,
    index: str | Path | None = None,
    html_out: str | Path | None = None,
    *,
    fmt: str | None = None,
    device: str | None = None,
    max_doc_length: int | None = None,
    adapt_vocabulary: bool = False,
    orcas: str | Path | None = None,
) -> Explanation:
    """Explain a model's score of document ``docid`` for ``query``.

    Args:
        query: query text.
        docid: the document, read from ``corpus`` (a corpus file) or ``index`` (a ckqti index
            directory's document store); exactly one of them.
        model_path: a checkpoint of any kind (TK, TKL, IDCM, NDRM1-3).
        html_out: also write the self-contained HTML page here.
        fmt: corpus format (None: from the file).
        device: torch device (default CUDA when available).
        max_doc_length: read this many document tokens instead of the model's trained cap.
        adapt_vocabulary: read text with the collection's vocabulary (the corpus's or the index's;
            TK, TKL, NDRM), as ``ckqti rerank --adapt-vocabulary`` does. With ``index``, an NDRM
            model always does, with the build's constants too: the explanation is then of the
            score the index holds (up to its quantization). ``model_path`` ``"ndrm2"`` or
            ``"ndrm2-anserini"`` (untrained) always reads the collection's statistics.
        orcas: an ORCAS file whose clicked queries lead the ``corpus`` document's text (and count in
            its statistics), as ``ckqti index --orcas`` and ``ckqti rerank --orcas`` read them; only
            with ``corpus`` (an index holds its own clicks, or none).

    Raises:
        InputError: no such document, neither / both of corpus and index given, ``orcas`` without
            ``corpus`` or a malformed ORCAS file.
        CkqtiError: an unreadable checkpoint.
    """
    if html_out is not None:  # before any work
        check_folder_of(html_out, "the HTML page")
        if Path(html_out).is_dir():
            raise InputError("is a directory; the HTML page is written to a file", html_out)
        if not replaceable_page(Path(html_out)):  # a corpus or a manifest given by mistake is not overwritten
            raise InputError("exists and is not an explanation page; --html replaces only an earlier page or an "
                             "empty file", html_out)
    if corpus is not None and Path(corpus).is_dir():
        raise InputError("is a directory, expected a corpus file (an index goes to --index)", corpus)
    from retriever.candidate_text import corpus_clicks

    clicks = corpus_clicks(orcas, corpus)
    if (corpus is None) == (index is None):
        raise InputError("give exactly one of a corpus file or an index to read the document from")
    if corpus is None:
        from retriever.index import Index

        index = Index(index)  # once: checksums are read for the document and for the model's statistics
        where = locate_document(index, docid)  # once too: the text and the index's score are of this row
        text = index.shards[where[0]].indexed_text(where[1])  # ORCAS clicks and URL too, as the index read it
    else:
        where, text = None, find_document(docid, corpus, fmt, clicks)
    reranker = open_explainer(model_path, corpus, index, fmt, device, max_doc_length, adapt_vocabulary, clicks)
    result = replace(explain_text(reranker, query, docid, text), repeated_clicks=clicks.repeated if clicks else 0)
    if where is not None and result.kind in QTI_KINDS and result.model_id == index.model_id:
        from retriever.search import Searcher  # the index's own model: say what search scores the document

        try:
            result = replace(result, index_score=Searcher(index).score_at(query, where))
        except QueryError:  # no query term in the index's vocabulary: search finds nothing to compare
            pass
    if html_out is not None:
        write_page(Path(html_out), result.to_html())
    return result
