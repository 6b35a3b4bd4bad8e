"""Input readers: corpora, queries and relevance judgements in the common IR file formats.

- :func:`read_corpus` streams :class:`Document` objects from TSV, BEIR JSONL, TREC or SMART
  files (plain or gzip), optionally joined with ORCAS clicks (:func:`load_orcas`);
  :func:`read_documents` checks in-memory ones (texts, dicts or :class:`Document` s), and
  :func:`read_document_mapping` a dict of them, ``{docid: text}``.
- :func:`read_queries` reads ``qid -> text`` (:func:`read_query_mapping` checks an in-memory one);
  :func:`read_qrels` reads ``qid -> {docid: gain}``.

Bad input raises :class:`ckqti.errors.InputError` naming the file and line.
"""

from indexer.readers.corpus import (
    CORPUS_FORMATS,
    ORCAS_MAX_TERMS,
    Clicks,
    Document,
    documents_in_memory,
    load_orcas,
    no_clicks_error,
    orcas_field,
    read_corpus,
    read_document_mapping,
    read_documents,
    repeated_clicks_note,
)
from indexer.readers.qrels import CRANFIELD_GAINS, QRELS_FORMATS, Qrels, count_judgements, read_qrels
from indexer.readers.queries import QUERY_FORMATS, read_queries, read_query_mapping

__all__ = [
    "CORPUS_FORMATS",
    "CRANFIELD_GAINS",
    "Clicks",
    "ORCAS_MAX_TERMS",
    "QRELS_FORMATS",
    "QUERY_FORMATS",
    "Document",
    "Qrels",
    "count_judgements",
    "load_orcas",
    "no_clicks_error",
    "orcas_field",
    "read_corpus",
    "documents_in_memory",
    "read_document_mapping",
    "read_documents",
    "read_qrels",
    "read_queries",
    "repeated_clicks_note",
    "read_query_mapping",
]
