"""A ranking model of any kind loaded to score query and document *text*
(:class:`Reranker`): TK, TKL, IDCM and the NDRM models, from their checkpoints
(:mod:`ckqti.models.checkpoint`'s one format: ``config`` the model's frozen config as a dict,
``state_dict`` its tensors, ``vocab`` and ``analyzer`` the text it reads; IDCM's ``vocab`` holds
its 30,522 WordPiece tokens, so the checkpoint carries its own tokenizer). Reranking
(:mod:`retriever.rerank`) and explanations (:mod:`ckqti.explain`) score through it;
:func:`adapt_reranker` lets a TK, TKL or NDRM checkpoint read another collection's words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import QTI_KINDS, Checkpoint, load_checkpoint, save_checkpoint
from ckqti.models.inputs import (
    WORDPIECE_ANALYZER,
    TermText,
    WordPieceText,
    pad_rows,
    tokenizer_from_vocabulary,
    wordpiece_vocabulary,
)
from ckqti.models.loading import pick_device
from ckqti.text import Analyzer
from ckqti.threads import ThreadChooser, batch_threads
from ckqti.vocab import Vocabulary

T = TypeVar("T")

RERANKER_KINDS = ("tk", "tkl", "idcm")
# Kinds that encode a document apart from the query (encode_document, encode_query, score_encoded): a rerank
# encodes each candidate once for all the queries that rank it (score_encoded_pairs). IDCM's cross-encoder
# reads the query and the document together.
ENCODED_KINDS = ("tk", "tkl")
# Distinct known query terms a QTI model reads at inference, as search does (retriever.query.MAX_QUERY_TERMS):
# every occurrence counts (a term twice in a query counts twice, as search weighs it), so a rerank or an
# explanation scores what the index does; a query with more is refused, as search refuses it.
QTI_QUERY_TERMS = 1024


def length_chunks(items: Iterable[T], length: Callable[[T], int], size: int) -> list[list[T]]:
    """``items`` grouped by ``length(item)`` (groups in order of first appearance, items in order),
    each group cut into lists of at most ``size``: batches that need no padding."""
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(length(item), []).append(item)
    return [same[s: s + size] for same in groups.values() for s in range(0, len(same), size)]


def score_encoded_pairs(model: nn.Module, queries: Sequence[np.ndarray], docs: Sequence[np.ndarray], pairs: np.ndarray,
                        device: torch.device, batch_size: int = 32,
                        done: Callable[[int], object] | None = None, threads: ThreadChooser | None = None) -> np.ndarray:
    """A TK or TKL ``model``'s (eval mode) scores of ``(query, document)`` index pairs, each query and each
    document encoded once however many pairs hold it (:meth:`Reranker.score_ids` encodes a document again
    for every query). Documents are encoded ``batch_size`` at a time, in order of length, and each batch
    is scored against all of its queries, ``batch_size`` pairs of one query length at a time (see
    :func:`_pair_chunks`), on the thread count ``threads`` chooses for it (None: as torch is set);
    ``done(n)`` is called as ``n`` more documents are scored.

    Shape:
        ``pairs [P, 2]`` int (query index, document index) -> ``[P]`` float64, as :meth:`Reranker.score_ids` scores them.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    out = np.zeros(len(pairs), dtype=np.float64)
    of_doc: list[list[int]] = [[] for _ in docs]  # each document's pairs
    for p, d in enumerate(pairs[:, 1].tolist()):
        of_doc[d].append(p)
    with torch.no_grad():
        qvecs = _encode_queries(model, queries, device, batch_size)
        order = sorted(range(len(docs)), key=lambda i: len(docs[i]))
        for start in range(0, len(order), batch_size):
            part = order[start: start + batch_size]
            ids = pad_rows([docs[i] for i in part]).to(device)  # [N, L]
            with batch_threads(threads, ids.numel()):
                vecs = model.encode_document(ids)  # [N, L', D]
                for chunk, rows in _pair_chunks([(p, n) for n, i in enumerate(part) for p in of_doc[i]],
                                                pairs, qvecs, batch_size, device):
                    q = pairs[chunk, 0].tolist()
                    qids = pad_rows([queries[i] for i in q]).to(device)  # [P, Q]
                    qv = torch.stack([qvecs[i] for i in q])  # [P, Q, D]
                    out[chunk] = model.score_encoded(qids, qv, ids[rows], vecs[rows]).double().cpu().numpy()
            if done is not None:
                done(len(part))
    return out


def _pair_chunks(mine: list[tuple[int, int]], pairs: np.ndarray, qvecs: Sequence[torch.Tensor], batch_size: int,
                 device: torch.device) -> list[tuple[list[int], torch.Tensor]]:
    """A document batch's ``(pair, document row)`` items cut into chunks of at most ``batch_size`` pairs whose
    queries have one length: no query is padded, as :meth:`Reranker.score_ids` pads none (a sum over a padded
    query's terms rounds otherwise, and TKL's region picks can flip on that: one of 20,000 SciFact pairs, whose
    top two windows were 8e-6 apart, scored 10% off) -> ``(pairs, document rows)``."""
    return [([p for p, _ in part], torch.as_tensor([n for _, n in part], device=device))
            for part in length_chunks(mine, lambda item: len(qvecs[pairs[item[0], 0]]), batch_size)]


def _encode_queries(model: nn.Module, queries: Sequence[np.ndarray], device: torch.device,
                    batch_size: int) -> list[torch.Tensor]:
    """Each query's vectors ``[Q_i, D]`` (the tokens the model reads), unpadded as :meth:`Reranker.score_ids`
    encodes it: in batches of queries of its length."""
    vecs: list[torch.Tensor] = [torch.zeros(0)] * len(queries)
    for part in length_chunks(range(len(queries)), lambda i: len(queries[i]), batch_size):
        enc = model.encode_query(pad_rows([queries[i] for i in part]).to(device))  # [N, Q, D]
        for n, i in enumerate(part):
            vecs[i] = enc[n]
    return vecs

@dataclass
class Reranker:
    """A ranking model of any kind with the text processing it was trained with.

    Attributes:
        kind: ``"tk"``, ``"tkl"``, ``"idcm"``, ``"ndrm1"``, ``"ndrm2"`` or ``"ndrm3"``.
        model: the model in eval mode on ``device``.
        text: :class:`TermText` or :class:`WordPieceText`.
        model_id: the checkpoint's id (``<kind>-<hash prefix>``).
        max_query_length, max_doc_length: tokens the model reads.
        threads: on a CPU, the thread count each batch of a rerank runs on (:class:`ckqti.threads.ThreadChooser`:
            torch's or one, whichever has lately been the faster; the scores are the same).
    """

    kind: str
    model: nn.Module
    text: TermText | WordPieceText
    model_id: str
    max_query_length: int
    max_doc_length: int
    device: torch.device
    threads: ThreadChooser | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.threads = ThreadChooser.for_device(self.device)

    def query_ids(self, query: str) -> np.ndarray:
        """The query's ids as the model reads them: the first ``max_query_length`` tokens, or for a
        QTI model every token (its score is a sum over them; :data:`QTI_QUERY_TERMS` caps distinct ones)."""
        return self.text.ids(query, None if self.kind in QTI_KINDS else self.max_query_length)

    def unreadable(self, query: np.ndarray) -> str | None:
        """Why the model cannot rank documents for ``query`` (ids of :meth:`query_ids`), or None:
        no token at all (stopwords, other scripts), or no word it knows (every score would be equal:
        the candidates would come out in docid order), or, for a QTI model, more distinct known terms
        than :data:`QTI_QUERY_TERMS` (search refuses those too)."""
        if not len(query):
            return "no term the model reads"
        if not self.reads(query):
            return "no word the model knows"
        return self.over_cap(query)

    def over_cap(self, query: np.ndarray) -> str | None:
        """Why a QTI model refuses ``query``'s ids (more distinct known terms than :data:`QTI_QUERY_TERMS`), or None."""
        if self.kind in QTI_KINDS and (n := len(np.unique(query[query > 1]))) > QTI_QUERY_TERMS:
            return f"query has {n} distinct known terms; a query may have at most {QTI_QUERY_TERMS}"
        return None

    def reads(self, ids: np.ndarray) -> bool:
        """Whether an id row holds anything the model knows: a known word (ids 0 and 1 are padding
        and unknown words) or, for IDCM's WordPiece, any piece."""
        return bool(len(ids)) if isinstance(self.text, WordPieceText) else bool((ids > 1).any())

    def doc_ids(self, doc: str) -> np.ndarray:
        return self.text.ids(doc, self.max_doc_length)

    def score_ids(self, query: np.ndarray, docs: Sequence[np.ndarray], lengths: Sequence[int] | None = None) -> np.ndarray:
        """Scores of one query's id row against document id rows (``lengths``: true lengths, NDRM only)."""
        if not len(docs):
            return np.zeros(0, dtype=np.float64)
        d = pad_rows(docs).to(self.device)  # [B, L]
        with torch.no_grad():
            if self.kind in QTI_KINDS:  # each distinct term scored once, times its occurrences: what the index sums
                terms, counts = np.unique(query[query > 1], return_counts=True)
                if not len(terms):  # no known term: no term scores
                    return np.zeros(len(docs), dtype=np.float64)
                q = torch.as_tensor(terms[None], device=self.device).expand(d.shape[0], -1)  # [B, T]
                true = torch.tensor(lengths if lengths is not None else [len(x) for x in docs], dtype=torch.float32)
                per_term = self.model.term_scores(q, d, true.to(self.device))  # [B, T]
                out = per_term @ torch.as_tensor(counts, dtype=per_term.dtype, device=self.device)
            else:
                q = pad_rows([query]).to(self.device).expand(d.shape[0], -1)  # [B, Q]
                out = self.model(q, d)
        return out.double().cpu().numpy()

    def term_table(self, terms: Sequence[np.ndarray], docs: Sequence[np.ndarray], lengths: Sequence[int]) -> list[np.ndarray]:
        """QTI models: each document's own ``terms`` (distinct known ids, > 1) scored alone against it, the
        documents encoded once for all of them (:meth:`score_ids` encodes them again for each query) and
        each scored against its own terms only, packed into rows. A query's score is its terms' entries
        times their occurrences, summed (unknown terms add 0).

        Shape:
            ``B`` term arrays and id rows -> ``B`` float64 arrays, each as long as its terms.
        """
        if self.kind not in QTI_KINDS:
            raise ValueError(f"a {self.kind} model's score is not a sum of term scores")
        if not len(docs):
            return []
        packed = np.zeros((len(docs), max(1, max(len(t) for t in terms))), dtype=np.int64)  # [B, T]: 0 pads
        for b, t in enumerate(terms):
            packed[b, :len(t)] = t
        d = pad_rows(docs).to(self.device)  # [B, L]
        with torch.no_grad(), batch_threads(self.threads, d.numel()):
            enc = self.model.encode_documents(d, torch.tensor(lengths, dtype=torch.float32, device=self.device))
            table = self.model.score_encoded(torch.as_tensor(packed, device=self.device), enc)  # [B, T]
        table = table.double().cpu().numpy() * (packed > 1)
        return [table[b, :len(t)] for b, t in enumerate(terms)]

    def score_pairs(self, queries: Sequence[np.ndarray], docs: Sequence[np.ndarray], pairs: np.ndarray,
                    batch_size: int = 32, done: Callable[[int], object] | None = None) -> np.ndarray:
        """TK and TKL (:data:`ENCODED_KINDS`): :func:`score_encoded_pairs` with this model; ``queries`` are
        read up to :attr:`max_query_length`."""
        if self.kind not in ENCODED_KINDS:
            raise ValueError(f"a {self.kind} model reads the query and the document together")
        return score_encoded_pairs(self.model, [q[: self.max_query_length] for q in queries], docs, pairs,
                                   self.device, batch_size, done, self.threads)

    def doc_length(self, doc: str) -> int:
        """Tokens of the whole document (NDRM's length normalisation reads the untruncated length)."""
        return self.text.length(doc)

    def doc_rows(self, docs: Sequence[str]) -> tuple[list[np.ndarray], list[int]]:
        """Every document's ``(doc_ids, doc_length)``: from one analysis each for NDRM models,
        which read the length; other models' lengths are 0 and their text is read only up to
        their cap (WordPiece texts in one batch)."""
        if self.kind in QTI_KINDS:
            pairs = [self.text.ids_and_length(d, self.max_doc_length) for d in docs]
            return [r for r, _ in pairs], [n for _, n in pairs]
        return self.text.ids_many(docs, self.max_doc_length), [0] * len(docs)

    def score_rows(self, query: np.ndarray, rows: Sequence[np.ndarray], lengths: Sequence[int] | None = None,
                   batch_size: int = 32) -> np.ndarray:
        """Scores of one query's ids against document id rows, in batches of similar length, each on the
        thread count :attr:`threads` chooses."""
        out = np.zeros(len(rows))
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for start in range(0, len(order), batch_size):
            part = order[start: start + batch_size]
            lens = [lengths[i] for i in part] if lengths is not None else None
            with batch_threads(self.threads, len(part) * max(1, max(len(rows[i]) for i in part))):  # padded tokens
                out[part] = self.score_ids(query, [rows[i] for i in part], lens)
        return out

    def score(self, query: str, docs: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Scores of ``query`` against every text of ``docs``."""
        rows, lengths = self.doc_rows(docs)  # lengths: read by NDRM models only (score_ids)
        return self.score_rows(self.query_ids(query), rows, lengths, batch_size)


def build_model(kind: str, config: Mapping[str, Any]) -> nn.Module:
    """A fresh TK, TKL or IDCM from its config dict (as saved in a checkpoint)."""
    if kind == "tk":
        from ckqti.models.tk import TK, TKConfig

        return TK(TKConfig(**dict(config)))
    if kind == "tkl":
        from ckqti.models.tkl import TKL, TKLConfig

        return TKL(TKLConfig(**dict(config)))
    if kind == "idcm":
        from ckqti.models.idcm import IDCM, IDCMConfig

        return IDCM(IDCMConfig(**dict(config)))
    raise ValueError(f"kind must be one of {RERANKER_KINDS}, got {kind!r}")


def model_lengths(kind: str, config: Any) -> tuple[int, int]:
    """``(max query tokens, max document tokens)`` a model of ``kind`` reads. A QTI model's score
    is a sum over query terms, so it reads every term of a query (up to :data:`QTI_QUERY_TERMS`)
    as the index's search does; its ``max_query_terms`` caps training queries only."""
    if kind in QTI_KINDS:
        return QTI_QUERY_TERMS, config.max_doc_terms
    return config.max_query_length, config.max_doc_length


def reranker_from_checkpoint(ckpt: Checkpoint, device: torch.device | str | None = None,
                             max_doc_length: int | None = None) -> Reranker:
    """A :class:`Reranker` of a loaded checkpoint of any kind (see :func:`load_reranker`)."""
    dev = pick_device(device)
    if ckpt.kind in QTI_KINDS:
        model = ckpt.build(dev)
        text: TermText | WordPieceText = TermText(Analyzer.from_dict(ckpt.analyzer), ckpt.vocab)
    elif ckpt.kind in RERANKER_KINDS:
        model = build_model(ckpt.kind, ckpt.config)
        model.load_state_dict({k: v.float() if v.dtype == torch.float16 else v for k, v in ckpt.state_dict.items()})
        model = model.to(dev).eval()
        if ckpt.kind == "idcm":
            text = WordPieceText(tokenizer_from_vocabulary(ckpt.vocab))
        else:
            text = TermText(Analyzer.from_dict(ckpt.analyzer), ckpt.vocab)
    else:
        raise CkqtiError(f"checkpoint holds a {ckpt.kind!r} model, which cannot rerank", ckpt.path)
    if max_doc_length is not None:
        set_max_doc_length(model, ckpt.kind, max_doc_length)
    q, d = model_lengths(ckpt.kind, model.config)
    return Reranker(ckpt.kind, model, text, ckpt.id, q, d, dev)


def untrained_reranker(spec: str, vocab: Vocabulary, constants: Mapping[str, float] | None = None,
                       device: torch.device | str | None = None, max_doc_length: int | None = None) -> Reranker:
    """The untrained NDRM2 of ``spec`` (``"ndrm2"``, ``"ndrm2-anserini"``) on a collection's
    vocabulary and statistics, with an index's build ``constants`` when given: as it fills an index."""
    from ckqti.models.loading import untrained_ndrm2
    from ckqti.models.specs import untrained_id

    dev = pick_device(device)
    model = untrained_ndrm2(dev, spec)[0](vocab)
    if constants:
        model.set_index_constants(dict(constants))
    if max_doc_length is not None:
        set_max_doc_length(model, "ndrm2", max_doc_length)
    text = TermText(Analyzer(), vocab)
    return Reranker("ndrm2", model, text, untrained_id(spec), *model_lengths("ndrm2", model.config), dev)


def set_max_doc_length(model: nn.Module, kind: str, length: int) -> None:
    """Let a model read ``length`` document tokens (TKL, NDRM and IDCM; TK's 200 cap is its definition)."""
    if kind == "tk":
        raise CkqtiError("TK's 200-token document cap is part of the model (its positions); --max-doc-length "
                         "is for TKL, IDCM and NDRM")
    name = "max_doc_terms" if kind in QTI_KINDS else "max_doc_length"
    model.config = replace(model.config, **{name: int(length)})


def load_reranker(path: str | Path, device: torch.device | str | None = None,
                  max_doc_length: int | None = None, vocabulary: Vocabulary | None = None) -> Reranker:
    """Load a checkpoint of any kind (TK, TKL, IDCM, NDRM1-3) as a :class:`Reranker`.

    Args:
        path: a checkpoint written by :func:`ckqti.train.rerankers.train_reranker` or ``ckqti train``.
        device: torch device (default CUDA when available).
        max_doc_length: read this many document tokens instead of the trained cap (TKL,
            NDRM and IDCM; for example TKL trained at 2,000 tokens applied at 4,000).
        vocabulary: a collection's vocabulary (analyzed with the checkpoint's analyzer) to
            read text with instead of the training vocabulary (TK, TKL, NDRM; ignored by
            IDCM): see :func:`adapt_reranker`.

    Raises:
        CkqtiError: unreadable or corrupted checkpoint, or a kind that cannot rerank.
    """
    ckpt = load_checkpoint(path)
    if vocabulary is not None and ckpt.kind != "idcm":
        return adapt_reranker(ckpt, vocabulary, device, max_doc_length)
    return reranker_from_checkpoint(ckpt, device, max_doc_length)


def adapt_reranker(ckpt: Checkpoint, vocab: Vocabulary, device: torch.device | str | None = None,
                   max_doc_length: int | None = None) -> Reranker:
    """A TK, TKL or NDRM checkpoint reading another collection's vocabulary (zero-shot use).

    Without this, every word the training collection never saw is the one unknown id, so in
    TK and TKL any unknown query word matches any unknown document word exactly. Embedding
    rows are remapped as :func:`ckqti.models.checkpoint.remap_rows` does for indexing (known
    words keep their rows; new words get rows predicted from their WordPiece composition,
    ``ckpt.fallback``); NDRM, and TKL with idf term weights, also take the collection's idf
    (:func:`ckqti.models.checkpoint.adapt_to_vocabulary`).
    """
    from ckqti.models.checkpoint import adapt_to_vocabulary, remap_rows

    dev = pick_device(device)
    if ckpt.kind in QTI_KINDS:
        model = adapt_to_vocabulary(ckpt, vocab, dev)
    elif ckpt.kind in ("tk", "tkl"):
        model = build_model(ckpt.kind, {**ckpt.config, "vocab_size": len(vocab)})
        state = {k: v.float() if v.dtype == torch.float16 else v for k, v in ckpt.state_dict.items()}
        state["embedding.weight"] = remap_rows(state["embedding.weight"], ckpt.vocab, vocab, ckpt.fallback)
        fresh = model.state_dict()  # idf buffers are sized for the training vocabulary: set_collection takes the new one's
        state.update({k: fresh[k] for k in state if k == "idf" or k.endswith(".idf")})
        model.load_state_dict(state)
        model.set_collection(vocab)
        model = model.to(dev).eval()
    else:
        raise CkqtiError(f"a {ckpt.kind!r} model has no term vocabulary to adapt", ckpt.path)
    if max_doc_length is not None:
        set_max_doc_length(model, ckpt.kind, max_doc_length)
    q, d = model_lengths(ckpt.kind, model.config)
    return Reranker(ckpt.kind, model, TermText(Analyzer.from_dict(ckpt.analyzer), vocab), ckpt.id, q, d, dev)


def save_reranker(path: str | Path, model: nn.Module, kind: str, text: TermText | WordPieceText,
                  meta: Mapping[str, Any] | None = None) -> Checkpoint:
    """Write a TK, TKL or IDCM model as a checkpoint (format of :mod:`ckqti.models.checkpoint`)."""
    if kind not in RERANKER_KINDS:
        raise ValueError(f"kind must be one of {RERANKER_KINDS}, got {kind!r}")
    config = json.loads(json.dumps(asdict(model.config)))
    if isinstance(text, WordPieceText):
        return save_checkpoint(path, model, kind, config, wordpiece_vocabulary(text.tokenizer), WORDPIECE_ANALYZER, meta)
    return save_checkpoint(path, model, kind, config, text.vocab, text.analyzer, meta)
