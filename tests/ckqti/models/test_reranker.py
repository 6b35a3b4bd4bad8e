"""Checkpoints of any kind loaded to score text (ckqti.models.reranker)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ckqti.errors import CkqtiError
from ckqti.models.inputs import TermText
from ckqti.models.reranker import QTI_QUERY_TERMS, Reranker, build_model, load_reranker, save_reranker
from ckqti.text import Analyzer
from ckqti.train.reranker_tk import match_init
from ckqti.vocab import Vocabulary

from ..conftest import TINY_MODEL

TINY_TK = dict(embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1)


def test_reranker_checkpoint_round_trip_and_errors(tmp_path):
    vocab = Vocabulary.build([["gene", "cell"], ["cell", "tumor"]])
    text = TermText(Analyzer(), vocab)
    torch.manual_seed(1)
    model = build_model("tkl", dict(vocab_size=len(vocab), max_doc_length=300, **TINY_TK))
    ckpt = save_reranker(tmp_path / "tkl.pt", model, "tkl", text, {"note": "test"})
    rr = load_reranker(tmp_path / "tkl.pt", device="cpu", max_doc_length=4000)
    assert rr.model_id == ckpt.id and rr.max_doc_length == 4000 and rr.model.config.max_doc_length == 4000
    for a, b in zip(model.state_dict().values(), rr.model.state_dict().values()):
        assert torch.equal(a, b)
    raw = (tmp_path / "tkl.pt").read_bytes()
    (tmp_path / "bad.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CkqtiError):
        load_reranker(tmp_path / "bad.pt")


def test_ndrm_checkpoints_load_as_rerankers(tmp_path):
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    analyzer = Analyzer()
    docs = ["gene expression in tumor cells", "the weather is nice today", "rain tomorrow", "sunny days"]
    vocab = Vocabulary.build([analyzer(d) for d in docs])
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab)
    save_checkpoint(tmp_path / "n2.pt", model, "ndrm2", model.config.to_dict(), vocab, analyzer)
    rr = load_reranker(tmp_path / "n2.pt", device="cpu")
    s = rr.score("tumor gene", docs)
    assert s[0] > 0 and s[1] == s[2] == s[3] == 0
    rr.max_doc_length = 2  # NDRM reads the whole length, however few ids it keeps
    long = docs + [" ".join(docs * 50)]
    assert [list(r) for r in rr.doc_rows(long)[0]] == [list(rr.doc_ids(d)) for d in long]
    assert rr.doc_rows(long)[1] == [rr.doc_length(d) for d in long] and rr.doc_rows(long)[1][-1] == 50 * (4 + 3 + 2 + 2)
    tk = Reranker("tk", rr.model, rr.text, "tk-test", 30, 3, rr.device)  # other kinds: capped ids, length 0
    assert [list(r) for r in tk.doc_rows(long)[0]] == [list(rr.text.ids(d))[:3] for d in long]
    assert tk.doc_rows(long)[1] == [0] * 5


def test_adapted_vocabulary_keeps_known_rows_and_stops_unknown_words_matching(tmp_path):
    """With the training vocabulary every unseen word is the one unknown id, so TK matches any two
    unseen words exactly; reading the new collection's vocabulary keeps known rows and tells them apart."""
    from ckqti.models.checkpoint import load_checkpoint
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.models.reranker import adapt_reranker

    analyzer = Analyzer()
    words = ("tumor cell growth gene expression protein receptor kinase mutation cancer patient trial dose "
             "blood heart brain neuron insulin glucose liver kidney lung virus bacteria infection vaccine").split()
    train_vocab = Vocabulary.build([analyzer(" ".join(words[i:i + 5])) for i in range(len(words))])
    torch.manual_seed(2)
    model = build_model("tk", dict(vocab_size=len(train_vocab), **TINY_TK))
    match_init(model)
    path = save_reranker(tmp_path / "tk.pt", model, "tk", TermText(analyzer, train_vocab)).path
    new_vocab = collection_vocabulary(["tumor zebrafish", "quasar telescope", "gene cell"], analyzer)
    plain = load_reranker(path, device="cpu")
    adapted = adapt_reranker(load_checkpoint(path), new_vocab, device="cpu")
    for term in ("tumor", "gene", "cell"):
        a = adapted.model.embedding.weight[new_vocab.id(term)]
        assert torch.equal(a, model.embedding.weight[train_vocab.id(term)])
    assert list(plain.query_ids("zebrafish")) == [1] and list(plain.doc_ids("quasar")) == [1]
    q, docs = "zebrafish", ["quasar telescope", "zebrafish tumor"]
    before = plain.score(q, docs)
    assert before[0] >= before[1]  # two unknown words "match" zebrafish at least as well as zebrafish itself
    s = adapted.score(q, docs)
    assert s[1] > s[0]  # only the document holding the word matches it


def qti_reranker(variant: str, docs: list[str], max_doc_length: int = 4000) -> Reranker:
    """An untrained NDRM of ``variant`` reading the analyzed ``docs``' vocabulary (no checkpoint)."""
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(d) for d in docs])
    torch.manual_seed(3)
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant=variant, **{**TINY_MODEL, "max_doc_terms": max_doc_length}),
                       vocab).eval()
    return Reranker(variant, model, TermText(analyzer, vocab), f"{variant}-test", QTI_QUERY_TERMS, max_doc_length,
                    torch.device("cpu"))


DOCS = ["gene expression in tumor cells", "tumor tumor growth", "rain tomorrow", "sunny days and tumor"]


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm2", "ndrm3"])
def test_a_qti_model_scores_a_query_as_the_index_sums_it(variant):
    """Search sums a query's term impacts, each term once per occurrence, and an unknown word has no
    postings: a rerank (or explanation) scores so too, whatever order and batches the documents come in."""
    rr = qti_reranker(variant, DOCS)
    one = rr.score("tumor", DOCS)
    np.testing.assert_allclose(rr.score("tumor tumor", DOCS), 2 * one, rtol=1e-6)
    np.testing.assert_allclose(rr.score("tumor zebrafish", DOCS), one, rtol=1e-6)  # zebrafish: unknown
    alone = [rr.score("tumor gene", [d])[0] for d in DOCS]
    np.testing.assert_allclose(rr.score("tumor gene", DOCS, batch_size=2), alone, rtol=1e-5)


def test_a_qti_model_normalises_by_the_whole_length_of_a_document_it_reads_part_of():
    """NDRM's length normalisation reads the untruncated length (as the index builder does): a
    document cut at 2 terms scores as the whole one when its terms all fall in the cut."""
    long = "quasar gene " + "filler " * 50
    whole = qti_reranker("ndrm2", DOCS + [long]).score("quasar", [long])
    cut = qti_reranker("ndrm2", DOCS + [long], max_doc_length=2).score("quasar", [long])
    assert whole[0] > 0 and cut[0] == pytest.approx(whole[0], rel=1e-6)


def test_a_query_is_unreadable_without_a_known_word_or_over_the_distinct_term_cap():
    """The reasons rerank and explain refuse a query, as search does: no term, no known word, or
    more than QTI_QUERY_TERMS distinct known terms (repeats and unknown words do not count)."""
    words = [f"w{i}x" for i in range(QTI_QUERY_TERMS + 1)]
    rr = qti_reranker("ndrm2", [" ".join(words)])
    assert rr.unreadable(rr.query_ids("the of and")) == "no term the model reads"
    assert rr.unreadable(rr.query_ids("zebrafish quasar")) == "no word the model knows"
    assert rr.unreadable(rr.query_ids(" ".join(words[:QTI_QUERY_TERMS] + ["zebrafish"] * 5))) is None
    assert rr.unreadable(rr.query_ids(" ".join([words[0]] * (2 * QTI_QUERY_TERMS)))) is None
    assert rr.unreadable(rr.query_ids(" ".join(words))) == (
        f"query has {QTI_QUERY_TERMS + 1} distinct known terms; a query may have at most {QTI_QUERY_TERMS}")


def test_an_untrained_ndrm2_takes_the_index_builds_constants():
    """An untrained NDRM2 reranking an index scores as its build did: with the build's prior mean
    document length (an append keeps it), not the current collection's."""
    from ckqti.models.reranker import untrained_reranker

    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(d) for d in DOCS])
    plain = untrained_reranker("ndrm2", vocab, device="cpu")
    built = {k: 3 * v for k, v in plain.model.index_constants().items()}
    rr = untrained_reranker("ndrm2", vocab, built, device="cpu")
    assert rr.model.index_constants() == pytest.approx(built) and rr.model_id == "ndrm2-untrained"
    assert not np.allclose(rr.score("gene growth", DOCS), plain.score("gene growth", DOCS))
    short = untrained_reranker("ndrm2", vocab, device="cpu", max_doc_length=2)
    assert short.max_doc_length == 2 and len(short.doc_ids(DOCS[0])) == 2  # --max-doc-length reaches it


def test_pairs_read_a_query_up_to_the_models_query_length_as_one_query_scored_alone():
    vocab = Vocabulary.build([["gene", "cell", "tumor", "growth", "rain"], ["cell", "tumor"]])
    text = TermText(Analyzer(), vocab)
    torch.manual_seed(4)
    model = build_model("tk", dict(vocab_size=len(vocab), **TINY_TK)).eval()
    rr = Reranker("tk", model, text, "tk-test", 3, 200, torch.device("cpu"))
    query = text.ids("gene cell tumor growth rain")
    docs = [text.ids("tumor growth"), text.ids("gene rain cell")]
    got = rr.score_pairs([query], docs, np.array([[0, 0], [0, 1]]))
    np.testing.assert_allclose(got, rr.score_ids(query[:3], docs), rtol=1e-5)
    assert not np.allclose(got, rr.score_ids(query[:2], docs), rtol=1e-5)
