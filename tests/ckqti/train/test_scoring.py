"""Scoring (query, document) pairs for validation and rerank runs (ckqti.train.scoring)."""

from __future__ import annotations

import pytest
import torch

from ckqti.models.inputs import pad_rows
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.train.data import analyze_queries, load_collection
from ckqti.train.scoring import as_run, score_pairs

from ..conftest import TINY_MODEL


def test_each_pair_scores_as_the_model_scores_it_alone_with_its_true_length(tiny_scifact):
    """Documents encoded once for several queries, in batches of similar length, truncated to
    ``max_doc_terms`` with their true lengths (as at indexing time): every pair's score is the
    model's forward score of that query and document; the model's training mode is restored."""
    coll = load_collection(tiny_scifact["corpus"])
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(coll.vocab), variant="ndrm3", **TINY_MODEL), coll.vocab)
    qids = list(tiny_scifact["qrels"])[:3]
    queries = analyze_queries({q: tiny_scifact["queries"][q] for q in qids}, coll.analyzer, coll.vocab, 20)
    index = coll.index()
    top = {q: [index[d] for d in tiny_scifact["candidates"][q][:6]] for q in qids}  # documents sharing query terms
    candidates = {**top, qids[2]: [*top[qids[2]], *top[qids[0]][:3], top[qids[0]][0]]}  # some asked twice, one repeated
    assert min(len(coll.doc(d)) for c in candidates.values() for d in c) > 40  # every document is cut
    for training in (True, False):
        model.train(training)
        scores = score_pairs(model, queries, coll, candidates, batch_size=3, max_doc_terms=40)
        assert model.training == training
    assert {q: sorted(s) for q, s in scores.items()} == {q: sorted(set(c)) for q, c in candidates.items()}
    model.eval()
    with torch.no_grad():
        for qid, by_doc in scores.items():
            for d, score in by_doc.items():
                alone = model(torch.as_tensor(queries[qid])[None], pad_rows([coll.doc(d)], 40),
                              torch.tensor([float(len(coll.doc(d)))]))
                assert score == pytest.approx(alone.item(), rel=1e-5, abs=1e-6)
    run = as_run(scores, coll.docids)
    assert run[qids[2]] == {coll.docids[d]: s for d, s in scores[qids[2]].items()}


def test_encoding_by_length_in_groups_is_one_padded_call_s_encoding_in_the_rows_order(tiny_scifact):
    """``encode_by_length`` encodes ``group`` rows at a time in order of length (on the CPU by default,
    on a GPU in one call); without dropout the joined encoding is one padded call's, row for row, each
    group padded to the batch's width with zero vectors."""
    from ckqti.train.scoring import ENCODE_GROUP, encode_by_length, encode_group

    assert encode_group(torch.device("cpu")) == ENCODE_GROUP and encode_group(torch.device("cuda")) is None
    coll = load_collection(tiny_scifact["corpus"])
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(coll.vocab), variant="ndrm3", **TINY_MODEL), coll.vocab).eval()
    rows = [coll.doc(d)[:n] for d, n in zip(range(7), (30, 5, 60, 12, 45, 1, 20))]  # not in order of length
    lengths = torch.tensor([float(len(r)) for r in rows])
    encode, calls = model.encode_documents, []
    model.encode_documents = lambda ids, lengths=None: (calls.append(ids.shape), encode(ids, lengths))[1]
    with torch.no_grad():
        whole = encode(pad_rows(rows), lengths)
        grouped = encode_by_length(model, rows, lengths, torch.device("cpu"), group=3)
        default = encode_by_length(model, rows, lengths, torch.device("cpu"))
    assert calls[:3] == [(3, 12), (3, 45), (1, 60)] and calls[3] == (7, 60)  # 7 rows <= ENCODE_GROUP: one call
    for got in (grouped, default):
        for name in ("ids", "mask", "lengths", "vectors"):
            torch.testing.assert_close(getattr(got, name), getattr(whole, name), rtol=1e-5, atol=1e-6, msg=name)
