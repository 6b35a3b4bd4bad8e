"""Pass one of a build (indexer/analyze.py): which fields reach the index and the document store."""

import os

from ckqti.text import Analyzer
from indexer.analyze import analyze_corpus


def test_every_field_is_indexed_and_the_store_keeps_clicks_and_url_as_prefix(tmp_path):
    corpus, clicks = tmp_path / "docs.tsv", tmp_path / "orcas.tsv"
    corpus.write_text("D1\thttp://zebra.example/okapi\tGiraffe facts\tcells divide\n"
                      "D2\thttp://x.example/\tPlain\tmembranes hold\n")
    clicks.write_text("D1\tnarwhal tusk\nD1\tnarwhal tusk\n")  # a line repeated: counted once, and as repeated
    analyzed = analyze_corpus(corpus, Analyzer(), orcas=clicks)
    assert (analyzed.clicked, analyzed.repeated) == (1, 1)  # D2 has a url, but no clicks
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


def test_a_shards_documents_are_a_slice_of_the_analyzed_table_written_as_from_lists(tmp_path, monkeypatch):
    """A build writes a shard's document store from :meth:`AnalyzedCorpus.doc_table` (no Python
    strings): a slice across the analysis's batches, in memory or memory-mapped, writes the same
    bytes as the rows as lists did; a saved table without the ``prefix`` column (analyzed before it
    was kept) is rebuilt with it, as the lists were."""
    import pyarrow as pa

    from indexer import analyze
    from indexer.shards import DOC_COLUMNS, write_documents

    corpus = tmp_path / "docs.tsv"  # MS MARCO's documents' columns: a URL, kept as the prefix
    corpus.write_text("".join(f"D{i}\thttp://u{i}.example/\tTitle {i}\t{'cells divide ' * i}\n" for i in range(7)))
    monkeypatch.setattr(analyze, "BATCH_DOCS", 2)
    memory = analyze_corpus(corpus, Analyzer())
    assert memory.docs["prefix"][3] == "http://u3.example/" and memory.docs["text"][3] == "cells divide " * 2 + "cells divide"
    streamed = analyze_corpus(corpus, Analyzer(), directory=tmp_path / "analyzed")
    old = analyze.AnalyzedCorpus(memory.offsets, memory.tokens, analyze.DocumentColumns(memory.docs.table.drop_columns(["prefix"])),
                                 memory.vocab)
    for got in (memory, streamed, old):
        for start, stop in ((0, 7), (1, 6), (3, 4), (2, 2)):
            table = got.doc_table(start, stop)
            assert isinstance(table, pa.Table) and table.column_names == list(DOC_COLUMNS) and table.num_rows == stop - start
            write_documents(tmp_path / "table.arrow", table)
            write_documents(tmp_path / "lists.arrow", got.doc_columns(start, stop))
            assert (tmp_path / "table.arrow").read_bytes() == (tmp_path / "lists.arrow").read_bytes(), (start, stop)


def test_term_ids_are_those_of_the_analyzer_whether_or_not_a_word_is_cached(tmp_path, monkeypatch):
    """The analysis maps each word to its term id once (a stopword to none) and keeps the first
    ``CACHED_WORDS``: with a cache of 3 words, or of none, the term ids, lengths and vocabulary are
    those of the analyzer's terms added a document at a time, and stopwords and repeats are kept out."""
    from ckqti.vocab import Vocabulary
    from indexer import analyze

    texts = ["The cells divide and the cells grow", "Of the of and", "Membranes hold cells; CELLS divide!",
             "caf\u00e9 na\u00efve \u212aelvin 2020 COVID-19", "growing grows grew"]
    corpus = tmp_path / "docs.tsv"
    corpus.write_text("".join(f"D{i}\t{t}\n" for i, t in enumerate(texts)))
    analyzer = Analyzer()
    expected = Vocabulary()
    ids = [expected.add_document(analyzer(t)) for t in texts]
    for cached in (1_000_000, 3, 0):
        monkeypatch.setattr(analyze, "CACHED_WORDS", cached)
        monkeypatch.setattr(analyze, "BATCH_DOCS", 2)
        got = analyze_corpus(corpus, analyzer)
        assert [got.doc_tokens(i).tolist() for i in range(len(texts))] == ids
        assert got.vocab.terms == expected.terms and got.docs["length"] == [len(i) for i in ids]
        assert got.vocab.df.tolist() == expected.trimmed().df.tolist()
        assert got.vocab.cf.tolist() == expected.trimmed().cf.tolist()
        assert (got.vocab.num_docs, got.vocab.total_terms) == (expected.num_docs, expected.total_terms)


def test_a_saved_analysis_whose_offsets_do_not_end_at_its_tokens_is_analyzed_again(tmp_path):
    """A work folder whose offsets and term ids disagree (one file from another run) is not
    loaded: a resumed build would read each document's terms from the wrong place."""
    import numpy as np

    from indexer.analyze import AnalyzedCorpus

    corpus, work = tmp_path / "docs.tsv", tmp_path / "analyzed"
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold water\n")
    analyze_corpus(corpus, Analyzer(), directory=work)
    offsets = np.load(work / "offsets.npy")
    assert AnalyzedCorpus.load(work) is not None and offsets[-1] == 5
    offsets[-1] -= 1  # ends before the last term id
    np.save(work / "offsets.npy", offsets)
    assert AnalyzedCorpus.load(work) is None and not (work / "DONE").exists()


def test_a_full_disk_while_analyzing_into_a_folder_names_the_file(tmp_path, monkeypatch):
    """A full disk fails the term ids' write (named); closing that file to give up flushed its buffer
    again, and that bare 'No space left on device', naming no file, replaced the named error (seen
    building on a 20-60 KiB tmpfs)."""
    import builtins
    import errno
    import io
    import json

    import pytest

    from ckqti.errors import DiskFullError
    from indexer import analyze

    class FullDisk(io.FileIO):
        def write(self, b):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full_open(path, mode="r", *args, **kwargs):
        return io.BufferedWriter(FullDisk(path, mode)) if "w" in mode else builtins.open(path, mode, *args, **kwargs)

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(json.dumps({"_id": "D1", "text": " ".join(f"word{i}" for i in range(3000))}) + "\n")
    monkeypatch.setattr(analyze, "open", full_open, raising=False)
    with pytest.raises(DiskFullError, match=r"^no space left on device writing \S+tokens\.npy$"):
        analyze_corpus(corpus, Analyzer(), directory=tmp_path / "analyzed")
