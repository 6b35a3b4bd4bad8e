"""The model a rerank scores with: a checkpoint read with its training vocabulary, or with a collection's."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import InputError
from ckqti.vocab import Vocabulary
from retriever.candidate_text import corpus_texts
from retriever.candidates import is_path
from retriever.index import Index, open_index

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker
    from indexer.readers.corpus import Document, Orcas  # Orcas: docid -> clicked queries (load_orcas)


def collection_of(corpus: str | Path | Sequence[Document] | None, index: str | Path | Index | None, fmt: str | None,
                  analyzer: dict, orcas: str | Path | Orcas | None = None) -> tuple[Vocabulary, dict]:
    """A collection's vocabulary in ``analyzer``'s terms: an index's (a directory, or an open
    :class:`Index`) as it holds it, with its build's model constants
    (:meth:`retriever.index.Index.vocabulary`), or a corpus file's (or documents', :func:`indexer.readers.documents_in_memory`),
    ORCAS clicks too when given (no constants)."""
    if index is not None:
        idx = open_index(index)  # checksums verified, as search does: a corrupted vocabulary gave NaN scores
        if idx.manifest.analyzer != analyzer:
            raise InputError("the index analyzed text otherwise than the model; read the documents from a corpus "
                             "file (--corpus)", idx.path)
        return idx.vocabulary(), dict(idx.manifest.model_constants)
    if corpus is None:  # open_reranker's untrained model without adapt_to: the CLI's commands always give one
        raise InputError("an untrained model ('ndrm2', 'ndrm2-anserini') reads the collection's statistics: give "
                         "adapt_to, a corpus or an index")
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.text import Analyzer

    return collection_vocabulary(corpus_texts(corpus, fmt, orcas=orcas).values(), Analyzer.from_dict(analyzer)), {}


def open_reranker(model_path: str | Path, device: str | None = None, max_doc_length: int | None = None,
                  adapt_to: str | Path | Index | Sequence[Document] | None = None, fmt: str | None = None,
                  adapt_kinds: Collection[str] | None = None, orcas: str | Path | Orcas | None = None) -> Reranker:
    """Load a checkpoint, reading text with its training vocabulary, or with ``adapt_to``'s: a corpus file's (with
    ``orcas``'s clicks, as :func:`retriever.candidate_text.corpus_texts`) or documents', or an index directory's as it
    holds it (an NDRM model then takes the build's constants too: it scores as the index does). ``"ndrm2"`` or
    ``"ndrm2-anserini"`` (untrained) always reads ``adapt_to``'s statistics.

    ``adapt_kinds``: adapt only checkpoints of these kinds and read the others as trained; None
    adapts every kind and refuses IDCM, whose WordPiece pieces every text shares.
    """
    from ckqti.models.checkpoint import QTI_KINDS, load_checkpoint
    from ckqti.models.reranker import adapt_reranker, load_reranker, reranker_from_checkpoint, untrained_reranker
    from ckqti.models.specs import UNTRAINED, resolve_model
    from ckqti.text import Analyzer

    model_path = resolve_model(model_path)  # a short name ('ndrm3-scifact') as its checkpoint
    untrained = model_path in UNTRAINED
    if adapt_to is None and not untrained:
        return load_reranker(model_path, device, max_doc_length)
    is_index = isinstance(adapt_to, Index) or (is_path(adapt_to) and Path(adapt_to).is_dir())
    corpus, index = (None, adapt_to) if is_index else (adapt_to, None)
    if untrained:
        vocab, constants = collection_of(corpus, index, fmt, Analyzer().to_dict(), orcas)
        return untrained_reranker(str(model_path), vocab, constants, device, max_doc_length)
    ckpt = load_checkpoint(model_path)  # once: its analyzer, then its weights
    if adapt_kinds is not None and ckpt.kind not in adapt_kinds:
        return reranker_from_checkpoint(ckpt, device, max_doc_length)
    if "tokenizer" in ckpt.analyzer:
        raise InputError("IDCM reads WordPiece pieces, which every text shares: there is no vocabulary to adapt "
                         "(--adapt-vocabulary is for TK, TKL and NDRM)", model_path)
    vocab, constants = collection_of(corpus, index, fmt, ckpt.analyzer, orcas)
    reranker = adapt_reranker(ckpt, vocab, device, max_doc_length)
    if ckpt.kind in QTI_KINDS and constants:
        reranker.model.set_index_constants(constants)
    return reranker
