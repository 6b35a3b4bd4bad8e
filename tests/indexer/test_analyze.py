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
