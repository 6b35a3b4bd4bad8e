"""Pass one of a build (indexer/analyze.py): which fields reach the index and the document store."""

from ckqti.text import Analyzer
from indexer.analyze import analyze_corpus


def test_every_field_is_indexed_and_the_store_keeps_clicks_and_url_as_prefix(tmp_path):
    corpus, clicks = tmp_path / "docs.tsv", tmp_path / "orcas.tsv"
    corpus.write_text("D1\thttp://zebra.example/okapi\tGiraffe facts\tcells divide\n"
                      "D2\thttp://x.example/\tPlain\tmembranes hold\n")
    clicks.write_text("D1\tnarwhal tusk\n")
    analyzed = analyze_corpus(corpus, Analyzer(), orcas=clicks)
    vocab = analyzed.vocab
    words = {vocab.terms[t] for t in analyzed.doc_tokens(0)}
    # clicks, url, title and body are one text (ORCAS first), as the readers' full_text orders them
    assert {"narwhal", "zebra", "okapi", "giraffe", "cell"} <= words
    first = [vocab.terms[t] for t in analyzed.doc_tokens(0)][:2]
    assert first == ["narwhal", "tusk"]
    assert analyzed.docs["length"][0] == len(analyzed.doc_tokens(0))
    # the store: title and body as read, clicks then url as the snippet's prefix
    assert analyzed.docs["title"][0] == "Giraffe facts" and analyzed.docs["text"][0] == "cells divide"
    assert analyzed.docs["prefix"] == ["narwhal tusk\nhttp://zebra.example/okapi", "http://x.example/"]


def test_an_analysis_into_a_folder_is_the_in_memory_one_saved_and_memory_mapped(tmp_path, monkeypatch):
    """A build analyzes into its work folder a batch at a time (here 2 documents): the corpus it
    gets, and a later load (a resumed build), equal the in-memory analysis, read from the files."""
    import json

    import numpy as np

    from indexer import analyze
    from indexer.analyze import AnalyzedCorpus

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"D{i}", "title": f"Title {i}", "text": "cells divide " + "and grow " * i}) + "\n"
                              for i in range(5)))
    monkeypatch.setattr(analyze, "BATCH_DOCS", 2)
    memory = analyze_corpus(corpus, Analyzer())
    streamed = analyze_corpus(corpus, Analyzer(), directory=tmp_path / "analyzed")
    loaded = AnalyzedCorpus.load(tmp_path / "analyzed")
    for got in (streamed, loaded):
        assert isinstance(got.tokens, np.memmap) and len(got) == 5
        assert dict(got.docs) == dict(memory.docs) and got.doc_columns(1, 4) == memory.doc_columns(1, 4)
        assert [t.tolist() for t in got.token_lists(0, 5)] == [t.tolist() for t in memory.token_lists(0, 5)]
        assert got.vocab.terms == memory.vocab.terms and (got.offsets == memory.offsets).all()
    assert memory.token_lists(1, 3)[-1].tolist() == memory.doc_tokens(2).tolist()
