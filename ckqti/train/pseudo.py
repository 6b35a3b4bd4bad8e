"""Weak supervision: documents' titles as pseudo-queries for their own documents.

SciFact has 809 training claims; its 5,183 abstracts each have a title, which reads like
a short query the abstract answers. Each title becomes a query ``title:<docid>`` whose one
relevant document is its own document (grade 1). The document keeps its title, as the
index stores it: the example teaches what the indexed document must match. Titles too
short to be a query (fewer than ``min_terms`` analyzed terms) are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ckqti.errors import InputError
from ckqti.text import Analyzer

PREFIX = "title:"


def title_pseudo_queries(
    docids: list[str], titles: list[str], analyzer: Analyzer, min_terms: int = 2
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """``(queries, qrels)`` with one pseudo-query per titled document.

    Returns:
        queries: ``"title:<docid>" -> title``; qrels: ``"title:<docid>" -> {docid: 1}``.

    Raises:
        InputError: no document has a title of ``min_terms`` analyzed terms (a corpus without
            titles: weak supervision would silently add nothing).
    """
    if min_terms < 1:
        raise ValueError(f"min_terms must be >= 1, got {min_terms}")
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for docid, title in zip(docids, titles):
        if len(analyzer(title)) < min_terms:
            continue
        qid = PREFIX + docid
        queries[qid] = title
        qrels[qid] = {docid: 1}
    if not queries:
        raise InputError(f"weak supervision by titles: no document has a title of {min_terms} or more terms "
                         "(does the corpus format carry titles?)")
    return queries, qrels


def draw_pseudo(pseudo_qids: Sequence[str], per_epoch: int | None, rng: np.random.Generator) -> list[str]:
    """``per_epoch`` of ``pseudo_qids`` (all when None) drawn without replacement by ``rng``, in list order."""
    if not pseudo_qids:
        return []
    n = len(pseudo_qids) if per_epoch is None else min(per_epoch, len(pseudo_qids))
    return [pseudo_qids[i] for i in sorted(rng.choice(len(pseudo_qids), n, replace=False))]
