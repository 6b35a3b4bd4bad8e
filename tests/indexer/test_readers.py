"""Readers on the four real collections, on gzip and ORCAS input, and on every kind of bad input."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from ckqti.errors import InputError
from ckqti.text import Analyzer
from indexer.readers import (
    ORCAS_MAX_TERMS,
    Document,
    count_judgements,
    load_orcas,
    orcas_field,
    read_corpus,
    read_documents,
    read_qrels,
    read_queries,
    read_query_mapping,
)

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
SCIFACT = DATA / "scifact"
TRECDL = DATA / "trecdl19-passage-subset"
CRANFIELD = DATA / "cranfield"
VASWANI = DATA / "vaswani"


def nonblank_lines(path: Path) -> int:
    """An independent count of data rows, to check the readers against."""
    return sum(1 for line in path.read_bytes().splitlines() if line.strip())


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def error_of(call, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        result = call(*args, **kwargs)
        if not isinstance(result, dict):
            list(result)
    return info.value


def assert_names(err: InputError, path: Path, line: int | None) -> None:
    expected = str(path) if line is None else f"{path}:{line}"
    assert str(err).startswith(expected + ": "), str(err)
    assert err.line == line


# --- the real collections -----------------------------------------------------------------


def test_scifact_counts_and_fields():
    docs = list(read_corpus(SCIFACT / "corpus.jsonl"))
    assert len(docs) == 5183 == len({d.docid for d in docs})
    first = docs[0]
    assert first.docid == "4983"
    assert first.title.startswith("Microstructural development of human newborn")
    assert first.text.startswith("Alterations of the architecture of cerebral white matter")
    assert first.full_text() == first.title + "\n" + first.text
    queries = read_queries(SCIFACT / "queries.jsonl")
    assert len(queries) == 1109
    assert queries["0"] == "0-dimensional biomaterials lack inductive properties."
    train, test = read_qrels(SCIFACT / "qrels" / "train.tsv"), read_qrels(SCIFACT / "qrels" / "test.tsv")
    assert count_judgements(train) == 919 == nonblank_lines(SCIFACT / "qrels" / "train.tsv") - 1  # minus the header
    assert count_judgements(test) == 339
    assert train["0"] == {"31715818": 1}
    docids = {d.docid for d in docs}
    assert all(d in docids for q in (train, test) for docs_ in q.values() for d in docs_)
    assert set(train) | set(test) <= set(queries)


def test_trecdl19_subset_counts_and_grades():
    docs = list(read_corpus(TRECDL / "corpus.jsonl"))
    assert len(docs) == 5000
    assert docs[0].docid == "4380635" and docs[0].title == "" and docs[0].text.startswith("Fahrenheit Scale")
    queries = read_queries(TRECDL / "queries.jsonl")
    assert len(queries) == 50 and queries["19335"] == "anthropological definition of environment"
    qrels = read_qrels(TRECDL / "qrels" / "test.tsv")  # headerless, tab-separated: BEIR
    assert len(qrels) == 43
    # The data README says 4,101 rows; the file holds 4,102 distinct judgements (no header, no blank line).
    assert count_judgements(qrels) == nonblank_lines(TRECDL / "qrels" / "test.tsv") == 4102
    assert {g for docs_ in qrels.values() for g in docs_.values()} == {1, 2, 3}
    assert qrels["19335"]["3175481"] == 3
    assert set(qrels) <= set(queries)


def test_cranfield_counts_ids_and_gain_inversion():
    docs = {d.docid: d for d in read_corpus(CRANFIELD / "cran.all.1400")}  # sniffed: ".1400" is no extension
    assert len(docs) == 1400 and set(docs) == {str(i) for i in range(1, 1401)}
    assert docs["1"].title == "experimental investigation of the aerodynamics of a wing in a slipstream ."
    assert docs["1"].text.startswith("experimental investigation of the aerodynamics of a\nwing in a slipstream .")
    assert docs["471"] == Document("471", "", "")  # an empty record in the collection is kept
    assert "compressor operation with one or more blade rows stalled" in docs["578"].text  # 2nd .W appended
    queries = read_queries(CRANFIELD / "cran.qry")
    assert list(queries) == [str(i) for i in range(1, 226)]  # numbered by order, not by .I (001, 002, 004, ...)
    assert queries["3"] == "what problems of heat conduction in composite slabs have been solved so far ."
    qrels = read_qrels(CRANFIELD / "cranqrel")
    assert count_judgements(qrels) == 1837 == nonblank_lines(CRANFIELD / "cranqrel")
    assert set(qrels) == set(queries)
    assert all(d in docs for docs_ in qrels.values() for d in docs_)
    # "1 184 2" -> 3, "2 12 1" -> 4, "1 13 4" -> 1, "1 486 -1" -> 0
    assert (qrels["1"]["184"], qrels["2"]["12"], qrels["1"]["13"], qrels["1"]["486"]) == (3, 4, 1, 0)
    gains = [g for docs_ in qrels.values() for g in docs_.values()]
    assert [gains.count(g) for g in (4, 3, 2, 1, 0)] == [128, 387, 734, 363, 225]


def test_vaswani_counts_and_trec_parsing():
    docs = list(read_corpus(VASWANI / "doc-text.trec"))
    assert len(docs) == 11429 == len({d.docid for d in docs})
    assert docs[0] == Document(
        "1",
        "",
        "compact memories have flexible capacities a digital data storage\n"
        "system with capacity up to bits and random and or sequential access\nis described",
    )
    queries = read_queries(VASWANI / "query-text.trec")
    assert len(queries) == 93
    assert queries["1"] == "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"
    qrels = read_qrels(VASWANI / "qrels")
    assert count_judgements(qrels) == 2083 == nonblank_lines(VASWANI / "qrels")
    assert set(qrels) == set(queries)
    docids = {d.docid for d in docs}
    assert all(d in docids for docs_ in qrels.values() for d in docs_)


# --- formats, gzip, ORCAS -----------------------------------------------------------------


def test_tsv_two_and_four_columns(tmp_path):
    two = write(tmp_path / "c.tsv", "d1\tfirst text\n\nd2\tsecond\r\n")
    assert list(read_corpus(two)) == [Document("d1", "", "first text"), Document("d2", "", "second")]
    four = write(tmp_path / "docs.tsv", "D1\thttp://a.org/x\tA Title\tThe body.\n")
    (doc,) = read_corpus(four)
    assert doc == Document("D1", "A Title", "The body.", url="http://a.org/x")
    assert doc.fields == ("http://a.org/x", "A Title", "The body.")


@pytest.mark.parametrize("header", ["docid\ttext", "ID\tText ", "docid\turl\ttitle\tbody"])
def test_a_tsv_corpus_header_is_not_a_document(tmp_path, header):
    rows = "d1\tone\n" if header.count("\t") == 1 else "d1\thttp://x\tT\tone\n"
    docs = list(read_corpus(write(tmp_path / "c.tsv", f"\n{header}\n{rows}")))
    assert [d.docid for d in docs] == ["d1"]
    later = list(read_corpus(write(tmp_path / "d.tsv", "d1\tone\ndocid\ttext\n")))  # only a first line
    assert [d.docid for d in later] == ["d1", "docid"]


def test_jsonl_alternative_keys(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"id": 7, "contents": "x y"}\n{"docid": "b", "title": "T", "text": "z"}\n')
    assert list(read_corpus(path)) == [Document("7", "", "x y"), Document("b", "T", "z")]


def test_a_blank_jsonl_text_falls_through_to_the_next_text_field(tmp_path):
    """'"text": ""' beside a "body" gave the document empty text; as a query's blank field does, it reads the next."""
    path = write(tmp_path / "c.jsonl", '{"_id": "1", "title": "T", "text": "", "body": "the body"}\n'
                                       '{"_id": "2", "text": " ", "contents": "the contents", "body": "unread"}\n'
                                       '{"_id": "3", "title": "only a title", "text": ""}\n')
    assert list(read_corpus(path)) == [Document("1", "T", "the body"), Document("2", "", "the contents"),
                                       Document("3", "only a title", "")]


def test_trec_tags_and_one_line_documents(tmp_path):
    path = write(
        tmp_path / "docs.trec",
        "<DOC><DOCNO> a1 </DOCNO> bare text </DOC>\n"
        "<DOC>\n<DOCNO>a2</DOCNO>\n<HEADLINE>\nBig <B>news</B>\n</HEADLINE>\n<DATE>1990</DATE>\n"
        "<TEXT>\n<P>First para.</P>\n</TEXT>\n<TEXT>Second.</TEXT>\n</DOC>\n"
        "<doc><docno>a3</docno><title>T3</title>\nplain body\n</doc>\n",
    )
    assert list(read_corpus(path)) == [
        Document("a1", "", "bare text"),
        Document("a2", "Big news", "First para.\nSecond."),
        Document("a3", "T3", "plain body"),
    ]


def test_trec_documents_named_by_an_id_attribute(tmp_path):
    """AQUAINT-2 and Gigaword name a document by its tag's id attribute, with no <DOCNO>; a
    <DOCNO> wins over the attribute."""
    path = write(
        tmp_path / "giga.trec",
        '<DOC id="AFP_ENG_1.0001" type="story">\n<HEADLINE>\nRain &amp; sun\n</HEADLINE>\n<TEXT>\n<P>\nWet.\n</P>\n'
        "</TEXT>\n</DOC>\n<doc ID='b2'>two</doc>\n<DOC id=c3>three</DOC>\n<DOC id=\"x\"><DOCNO>d4</DOCNO>four</DOC>\n",
    )
    assert list(read_corpus(path)) == [
        Document("AFP_ENG_1.0001", "Rain & sun", "Wet."),
        Document("b2", "", "two"),
        Document("c3", "", "three"),
        Document("d4", "", "four"),
    ]
    path = write(tmp_path / "typed.trec", '<DOC type="story">\ntext\n</DOC>\n')
    err = error_of(read_corpus, path)
    assert_names(err, path, 1)
    assert "without <DOCNO> or an id attribute" in str(err)


def test_trec_comments_are_dropped_and_entities_decoded(tmp_path):
    path = write(tmp_path / "d.trec", "<DOC><DOCNO>c1</DOCNO><!-- okapi\nnote --><TITLE>R&amp;D</TITLE>"
                                      "<TEXT>x &lt; y &amp;&amp; z</TEXT></DOC>\n")
    assert list(read_corpus(path)) == [Document("c1", "R&D", "x < y && z")]


def test_trec_disk_entities_are_not_words(tmp_path):
    """The Federal Register's &hyph; and &blank; are SGML entities HTML lacks: they were indexed as the
    words 'hyph' and shown as U+2423; an escaped one stays text."""
    path = write(tmp_path / "fr.trec", "<DOC><DOCNO>FR1</DOCNO><TEXT>low&hyph;income&blank;&blank;aid "
                                       "&sect;2 &amp;hyph;</TEXT></DOC>\n")
    assert list(read_corpus(path)) == [Document("FR1", "", "low-income aid §2 &hyph;")]
    path = write(tmp_path / "t.trec", "<top>\n<num> Number: 9\n<title> child&hyph;care\n</top>\n")
    assert read_queries(path) == {"9": "child-care"}


def test_unknown_entities_are_text_as_written(tmp_path):
    """'AT&T;' and 'R&D;' (an ampersand, then a semicolon) lost their last letter, read as an unknown entity
    and made a space; a name HTML knows only without its semicolon ('&not') is not read by that prefix."""
    path = write(tmp_path / "n.trec", "<DOC><DOCNO>N1</DOCNO><TITLE>R&D;</TITLE><TEXT>AT&T; &amp; MCI; "
                                      "&notable; &copyright;</TEXT></DOC>\n")
    [doc] = read_corpus(path)
    assert doc == Document("N1", "R&D;", "AT&T; & MCI; &notable; &copyright;")
    assert Analyzer(stemmer="none", stopwords="none")(doc.full_text()) == \
        ["r", "d", "at", "t", "mci", "notable", "copyright"]
    path = write(tmp_path / "t.trec", "<top>\n<num> Number: 9\n<title> R&D; spending\n</top>\n")
    assert read_queries(path) == {"9": "R&D; spending"}


def test_web_pages_in_trec_documents_lose_headers_scripts_and_styles(tmp_path):
    """WT10g and GOV2 pages: the <DOCHDR>'s HTTP headers were indexed as text, the <head>'s script and
    style as the title; the header's URL is the url field."""
    path = write(tmp_path / "gov2.trec", "<DOC>\n<DOCNO>GX1</DOCNO>\n<DOCOLDNO>IA035-B022</DOCOLDNO>\n<DOCHDR>\n"
                 "http://a.gov/x\nHTTP/1.1 200 OK\nContent-Type: text/html\n</DOCHDR>\n<html><head><title>Page"
                 '</title><SCRIPT type="text/javascript">var x;</SCRIPT><style>p {}</style></head>\n'
                 "<body><p>Body &nbsp; text</p></body></html>\n</DOC>\n")
    assert list(read_corpus(path)) == [Document("GX1", "Page", "Body text", url="http://a.gov/x")]


def test_markup_between_trec_documents_is_skipped(tmp_path):
    """AQUAINT-2 wraps its documents in an XML prolog and <DOCSTREAM>: read as text outside <DOC>."""
    path = write(tmp_path / "apw.xml", '<?xml version="1.0" encoding="UTF-8" ?>\n<!DOCTYPE DOCSTREAM SYSTEM '
                 '"a2_full.dtd">\n<DOCSTREAM>\n<!-- part 1 -->\n<DOC id="A1" type="story">\n<TEXT>\n<P>\nOne.\n'
                 "</P>\n</TEXT>\n</DOC>\n</DOCSTREAM>\n")
    assert list(read_corpus(path)) == [Document("A1", "", "One.")]
    path = write(tmp_path / "stray.trec", "<DOCSTREAM>\n<DOC><DOCNO>1</DOCNO></DOC>\n<P>stray</P>\n</DOCSTREAM>\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 3)
    assert "text outside <DOC>" in str(err)


@pytest.mark.parametrize("name", ["copy.all.1400", "nameless", "docs.txt"])
def test_smart_is_sniffed_whatever_the_name(tmp_path, name):
    path = write(tmp_path / name, ".I 5\n.T\nA Title\n.A\nsomeone\n.W\nline one\nline two\n.I 9\n.W\nonly text\n")
    assert list(read_corpus(path)) == [Document("5", "A Title", "line one\nline two"), Document("9", "", "only text")]


def test_topics_with_number_prefix_and_no_closing_tags(tmp_path):
    path = write(
        tmp_path / "topics.txt",
        "<top>\n<num> Number: 051\n<title> Topic:  Airbus\n  Subsidies\n\n<desc> Description:\nsome text\n</top>\n",
    )
    assert read_queries(path) == {"51": "Airbus Subsidies"}  # TREC-1's qrels.51-100 say 51, not 051
    path = write(tmp_path / "plain.txt", "<top>\n<num>007</num><title>Bond</title>\n</top>\n<top>\n"
                                         "<num> Number: MB001 </num>\n<title> Tweets\n</top>\n")
    # a number of digits loses its zeros with or without "Number:" (Anserini reads both as integers), others not
    assert read_queries(path) == {"7": "Bond", "MB001": "Tweets"}


def test_query_tsv_and_fmt_override(tmp_path):
    path = write(tmp_path / "q.dat", "1\tfirst query\n2\t  second   query \n")
    assert read_queries(path, fmt="tsv") == {"1": "first query", "2": "second query"}
    assert read_queries(path) == read_queries(path, fmt="tsv")  # sniffed by the tab


def test_qrels_trec_beir_cranfield_and_override(tmp_path):
    assert read_qrels(write(tmp_path / "a.txt", "q1 0 d1 2\nq1 0 d2 0\n")) == {"q1": {"d1": 2, "d2": 0}}
    assert read_qrels(write(tmp_path / "b.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")) == {"q1": {"d1": 1}}
    spaced = write(tmp_path / "c.txt", "1 5 1\n1 6 -1\n")
    assert read_qrels(spaced, fmt="cranfield") == {"1": {"5": 4, "6": 0}}
    assert read_qrels(spaced, fmt="beir") == {"1": {"5": 1, "6": -1}}
    shutil.copy(spaced, tmp_path / "cranqrel.sample")
    assert read_qrels(tmp_path / "cranqrel.sample") == {"1": {"5": 4, "6": 0}}


def test_qrels_whose_only_line_reads_as_a_header_name_it(tmp_path):
    lone = write(tmp_path / "lone.txt", "\nq1 0 d1\n")  # a TREC line without its grade: BEIR's header shape
    with pytest.raises(InputError, match=r"lone.txt:2: .*'q1 0 d1', reads as a BEIR header"):
        read_qrels(lone)
    with pytest.raises(InputError, match=r"blank.txt: no judgements in qrels file$"):
        read_qrels(write(tmp_path / "blank.txt", "\n\n"), fmt="beir")


def gzipped(src: Path, dst: Path) -> Path:
    dst.write_bytes(gzip.compress(src.read_bytes(), compresslevel=1))
    return dst


@pytest.mark.parametrize("src", [VASWANI / "doc-text.trec", CRANFIELD / "cran.all.1400", TRECDL / "corpus.jsonl"])
def test_gzip_by_extension_and_by_magic(tmp_path, src):
    plain = list(read_corpus(src))
    assert list(read_corpus(gzipped(src, tmp_path / (src.name + ".gz")))) == plain
    assert list(read_corpus(gzipped(src, tmp_path / "no-hint"))) == plain  # magic bytes, content sniffed


def test_gzip_queries_and_qrels(tmp_path):
    assert read_queries(gzipped(CRANFIELD / "cran.qry", tmp_path / "cran.qry.gz")) == read_queries(
        CRANFIELD / "cran.qry"
    )
    assert read_qrels(gzipped(VASWANI / "qrels", tmp_path / "qrels.gz")) == read_qrels(VASWANI / "qrels")


def test_orcas_join_order_and_both_layouts(tmp_path):
    corpus = write(tmp_path / "docs.tsv", "D1\thttp://u\tTitle\tBody\nD2\thttp://v\tT2\tB2\n")
    two = write(tmp_path / "orcas2.tsv", "D1\tfirst click\nD9\tunknown doc\nD1\tsecond  click\n")
    docs = list(read_corpus(corpus, orcas=two))
    assert docs[0].orcas == "first click second click" and docs[1].orcas == ""
    assert docs[0].full_text() == "first click second click\nhttp://u\nTitle\nBody"
    four = write(tmp_path / "orcas4.tsv", "11\tfirst click\tD1\thttp://u\n12\tsecond click\tD1\thttp://u\n")
    assert load_orcas(two) == {"D1": ["first click", "second click"], "D9": ["unknown doc"]}
    assert load_orcas(four) == {"D1": ["first click", "second click"]}
    assert list(read_corpus(corpus, orcas=load_orcas(four))) == docs  # a loaded mapping works too


def test_orcas_header_line_is_no_click(tmp_path):
    """A first line naming the columns (``docid<TAB>query``, as pandas writes one; the release's four
    ``qid query docid url``) was read as a click on a document named ``docid``. It is skipped, as a
    corpus's or a queries file's header is; only a first line is a header, and a click whose words
    happen to be column names elsewhere is kept."""
    two = write(tmp_path / "orcas2.tsv", "\nDocID\tQuery\r\nD1\tfirst click\ndocid\tquery\n")
    assert load_orcas(two) == {"D1": ["first click"], "docid": ["query"]}
    four = write(tmp_path / "orcas4.tsv", "qid\tquery\tdoc_id\turl\n11\tfirst click\tD1\thttp://u\n")
    assert load_orcas(four) == {"D1": ["first click"]}
    clicked_id = write(tmp_path / "clicked_id.tsv", "D1\tquery\n")  # a document's id is not a column's name
    assert load_orcas(clicked_id) == {"D1": ["query"]}
    only = write(tmp_path / "only.tsv", "doc_id\tquery\n")
    assert str(error_of(load_orcas, only)) == f"{only}: no ORCAS clicks in file"


def test_orcas_blank_queries_are_skipped_and_the_clicks_after_them_kept(tmp_path):
    two = write(tmp_path / "orcas2.tsv", "D1\tfirst click\nD1\t \nD2\t\nD1\tsecond click\n11\t\tD2\tu\nD2\tthird\n")
    assert load_orcas(two) == {"D1": ["first click", "second click"], "D2": ["third"]}


def test_orcas_repeated_lines_count_once(tmp_path):
    """The ORCAS release lists each (query, document) pair once; a repeated line (files joined, a
    pair written twice) weighed its query twice in the field. It is dropped, whitespace aside, and
    counted; another document's same query, or another case, is a click of its own."""
    two = write(tmp_path / "orcas2.tsv", "D1\tcell  division\r\nD2\tcell division\r\nD1\tcell division \r\n"
                                         "D1\tCell division\r\nD1\tcell division\r\n")
    loaded = load_orcas(gzipped(two, tmp_path / "orcas2.tsv.gz"))
    assert loaded == {"D1": ["cell division", "Cell division"], "D2": ["cell division"]} and loaded.repeated == 2
    four = write(tmp_path / "orcas4.tsv", "11\tcell division\tD1\thttp://u\n11\tcell division\tD1\thttp://u\n")
    assert load_orcas(four) == {"D1": ["cell division"]} and load_orcas(four).repeated == 1
    corpus = write(tmp_path / "c.tsv", "D1\tbody\nD2\tother\n")
    assert [d.orcas for d in read_corpus(corpus, orcas=two)] == ["cell division Cell division", "cell division"]


def test_orcas_cap_at_2000_terms(tmp_path):
    lines = "".join(f"D1\t{' '.join(f'q{i}w{j}' for j in range(7))}\n" for i in range(400))  # 2,800 terms
    orcas = write(tmp_path / "orcas.tsv", lines)
    loaded = load_orcas(orcas)
    assert len(loaded["D1"]) == 286  # queries stop being kept once 2,000 terms are held (286 * 7 = 2,002)
    corpus = write(tmp_path / "c.tsv", "D1\tbody\n")
    (doc,) = read_corpus(corpus, orcas=orcas)
    terms = doc.orcas.split()
    assert len(terms) == ORCAS_MAX_TERMS == 2000
    assert terms[0] == "q0w0" and terms[-1] == "q285w4"  # the first 2,000 terms, in click order
    assert orcas_field(["a b c", "d"], max_terms=3) == "a b c"



def test_orcas_clicks_stop_being_kept_at_exactly_2000_terms(tmp_path):
    """A document holding exactly 2,000 terms of clicks keeps no further query (500 of 4 terms, not 501),
    so the 18M-line release is held at most one query past the cap a document."""
    lines = "".join(f"D1\t{' '.join(f'q{i}w{j}' for j in range(4))}\n" for i in range(600))
    loaded = load_orcas(write(tmp_path / "orcas.tsv", lines))
    assert len(loaded["D1"]) == 500 and loaded["D1"][-1] == "q499w0 q499w1 q499w2 q499w3"


def test_orcas_cap_counts_the_terms_the_analyzer_splits_words_into(tmp_path):
    """The cap counted whitespace words, and a query word the analyzer splits (``covid-19``,
    ``www.irs.gov``) is several terms: 2,000 words of ``a-b-c x`` clicks were 4,000 analysed terms,
    the whole of a 4,000-term model's window, and the body was read not at all. The cap counts the
    analyzer's words (alphanumeric runs, stopwords too), so the field is at most 2,000 terms and the
    body keeps its half; a word the cap cuts keeps its first terms, as the analyzer reads them."""
    lines = "".join(f"D1\tq{i}a-q{i}b-q{i}c x{i}\n" for i in range(1000))  # 2,000 words, 4,000 terms
    loaded = load_orcas(write(tmp_path / "orcas.tsv", lines))
    assert len(loaded["D1"]) == 500  # 500 queries of 4 terms hold 2,000
    (doc,) = read_corpus(write(tmp_path / "c.tsv", "D1\tbody\n"), orcas=loaded)
    assert len(Analyzer().words(doc.orcas)) == ORCAS_MAX_TERMS and doc.orcas.endswith("q499a-q499b-q499c x499")
    assert orcas_field(["x U.S.A-Today", "z"], max_terms=3) == "x u s"
    assert orcas_field(["x y", "z"], max_terms=3) == "x y z" and orcas_field(["-- x", "y"], max_terms=1) == "-- x"


def test_orcas_repeated_lines_are_counted_past_the_cap(tmp_path):
    """A document whose clicks had reached the cap skipped every further line before asking whether
    it repeated one: a file joined twice counted none of its heavily clicked documents' repeats. A
    line repeating a query the document holds is counted past the cap too (one repeating a query the
    cap dropped is not known: dropped queries are not held, which bounds memory)."""
    lines = [f"D1\t{' '.join(f'q{i}w{j}' for j in range(4))}\n" for i in range(600)]  # 500 kept
    loaded = load_orcas(write(tmp_path / "orcas.tsv", "".join(lines + lines[:3] + lines[590:])))
    assert len(loaded["D1"]) == 500 and loaded.repeated == 3


def test_a_smart_field_repeated_in_a_record_is_appended(tmp_path):
    """Cranfield records 576 and 578 hold two ``.W`` fields: both are the document's text, in order."""
    path = write(tmp_path / "c.smart", ".I 1\n.T\ntitle\n.W\nfirst part\n.B\nsource\n.W\nsecond part\n")
    (doc,) = read_corpus(path)
    assert (doc.title, doc.text) == ("title", "first part\nsecond part")

# --- bad input: every error names the file and the line -------------------------------------


def test_tsv_wrong_column_count(tmp_path):
    path = write(tmp_path / "c.tsv", "d1\tok\nd2\ttitle\tbody\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 2)
    assert "found 3" in str(err)


def test_bad_json(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"_id": "1", "text": "a"}\n{"_id": "2", "text": \n')
    assert_names(error_of(read_corpus, path), path, 2)


def test_json_nested_too_deeply_for_the_parser_is_named(tmp_path):
    """Valid JSON thousands of levels deep raised RecursionError with a traceback."""
    deep = "[" * 100_000 + "]" * 100_000
    for reader in (read_corpus, read_queries):
        path = write(tmp_path / "c.jsonl", '{"_id": "1", "text": "a"}\n' + deep + "\n")
        err = error_of(reader, path)
        assert_names(err, path, 2)
        assert "nested too deeply" in str(err)


def test_json_number_too_long_for_the_parser_is_named(tmp_path):
    """An integer of more digits than Python converts (4,300) raised ValueError with a traceback."""
    for reader, key in ((read_corpus, "text"), (read_queries, "text")):
        path = write(tmp_path / "c.jsonl", '{"_id": "1", "%s": "a"}\n{"_id": %s, "%s": "b"}\n' % (key, "9" * 5000, key))
        err = error_of(reader, path)
        assert_names(err, path, 2)
        assert "bad JSON (a number of more than" in str(err)


def test_ids_with_invisible_characters_are_named(tmp_path):
    """Two BOM files joined with cat, a NUL or a zero-width space in an id: read into ids that look
    like others and match none (a NUL ends the id for trec_eval); the file's own first BOM is dropped."""
    bom = "\ufeff"
    path = write(tmp_path / "c.tsv", bom + "d1\ta\n" + bom + "d2\tb\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 2)
    assert "docid '\\ufeffd2' contains the invisible character U+FEFF (a byte-order mark" in str(err)
    path = write(tmp_path / "q.tsv", "1\ta\n2\u200b\tb\n")
    err = error_of(read_queries, path)
    assert_names(err, path, 2)
    assert "U+200B (zero width space)" in str(err)
    path = write(tmp_path / "qrels.txt", "1 0 d1 1\n1 0 d\x002 1\n")
    err = error_of(read_qrels, path)
    assert_names(err, path, 2)
    assert "U+0000" in str(err)
    assert [d.docid for d in read_corpus(write(tmp_path / "ok.tsv", bom + "d1\ta\nd\u00e92\tb\n"))] == ["d1", "d\u00e92"]


def test_json_missing_id_and_missing_text(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"_id": "1", "text": "a"}\n\n{"title": "no id"}\n')
    err = error_of(read_corpus, path)
    assert_names(err, path, 3)
    assert "missing document id" in str(err)
    path = write(tmp_path / "d.jsonl", '{"_id": "1", "metadata": {}}\n')
    assert_names(error_of(read_corpus, path), path, 1)


def test_a_jsonl_line_without_an_id_or_text_field_names_the_fields_it_has(tmp_path):
    """A corpus with other field names (``doc_id``, ``abstract``) was told only which names were wanted,
    and a query file's ``question`` field read as a query without text; the error now shows the line's
    own fields, so the mismatch is seen at once."""
    path = write(tmp_path / "c.jsonl", '{"doc_id": "1", "abstract": "x y"}\n')
    err = error_of(read_corpus, path)
    assert_names(err, path, 1)
    assert "missing document id (one of _id, id, docid; found 'doc_id', 'abstract')" in str(err)
    path = write(tmp_path / "d.jsonl", '{"_id": "1", "abstract": "x y"}\n')
    assert "(title or one of text, contents, body; found '_id', 'abstract')" in str(error_of(read_corpus, path))
    path = write(tmp_path / "q.jsonl", '{"_id": "1", "text": "ok"}\n{"query-id": "2", "text": "x"}\n')
    assert str(error_of(read_queries, path)) == f"{path}:2: missing query id (one of _id, id, qid, query_id; found 'query-id', 'text')"
    path = write(tmp_path / "r.jsonl", '{"_id": "1", "question": "x"}\n{"_id": "2", "text": " "}\n')
    assert str(error_of(read_queries, path)) == f"{path}:1: no query text field (one of text, query, title; found '_id', 'question')"
    path = write(tmp_path / "s.jsonl", '{"_id": "2", "text": " "}\n')
    assert str(error_of(read_queries, path)) == f"{path}:1: query '2' has no text"  # a text field, blank


def test_documents_in_memory_read_as_the_same_documents_in_a_file(tmp_path):
    """``read_documents`` (``api.index`` of a list): a dict reads as a JSONL line (BEIR's and Pyserini's
    keys), a text is numbered by its position as bm25s numbers a list, a Document is kept."""
    lines = ['{"id": 7, "contents": " x y "}', '{"docid": "b", "title": "T", "text": "z"}',
             '{"_id": "c", "text": "", "body": "the body", "url": "u"}']
    path = write(tmp_path / "c.jsonl", "\n".join(lines) + "\n")
    import json

    assert read_documents(json.loads(line) for line in lines) == list(read_corpus(path))
    assert read_documents(["a cat", " a dog "]) == [Document("0", "", "a cat"), Document("1", "", "a dog")]
    assert read_documents([Document(" d1 ", "T", "x"), "y"]) == [Document("d1", "T", "x"), Document("1", "", "y")]


@pytest.mark.parametrize(("documents", "where", "message"), [
    (["a", 3], "documents[1]", "expected a text, a dict (id and text fields, as in a JSONL corpus) or a Document, found int"),
    ([{"doc_id": "1", "abstract": "x"}], "documents[0]", "missing document id (one of _id, id, docid; found 'doc_id', 'abstract')"),
    ([{"id": "1", "abstract": "x"}], "documents[0]", "no text field (title or one of text, contents, body; found 'id', 'abstract')"),
    ([{"id": "1", "text": ["x"]}], "documents[0]", "field 'text' must be a string, found list"),
    ([{"id": "a b", "text": "x"}], "documents[0]", "docid 'a b' contains whitespace"),
    (["x", {"id": "0", "text": "y"}], "documents[1]", "duplicate docid '0' (first at documents[0])"),
    ([], "documents", "no documents in the list"),
    ("a cat", "documents", "expected a list of documents, got one str"),
    ({"id": "1", "text": "x"}, "documents", "expected a list of documents, got one dict"),
])
def test_bad_documents_in_memory_name_the_item(documents, where, message):
    err = error_of(read_documents, documents)
    assert str(err) == f"{where}: {message}"


def test_queries_in_memory_read_as_the_same_queries_in_a_file(tmp_path):
    path = write(tmp_path / "q.tsv", "1\t a  query\nq2\tanother\n")
    assert read_query_mapping({1: " a  query", " q2 ": "another"}) == read_queries(path) == {"1": "a query", "q2": "another"}
    assert read_query_mapping({np.int64(1): "a query", "q2": "another"}) == read_queries(path)  # numpy's integer too


def test_integer_docids_in_memory_are_their_digits():
    """A dict's integer keys, numpy's too (numpy's was refused: "found int64"), are docids read as their digits, as
    rerank's candidates and evaluate's runs read them; a float is refused, naming it (7.0 is no docid '7')."""
    from indexer.readers import read_document_mapping

    assert read_document_mapping({np.int64(7): "x", 8: {"title": "T", "text": "y"}}) == [
        Document("7", "", "x"), Document("8", "T", "y")]
    assert str(error_of(read_document_mapping, {7.0: "x"})) == ("corpus[7.0]: a docid must be a string or an integer, "
                                                                 "found float 7.0")


@pytest.mark.parametrize(("queries", "message"), [
    (["a query"], "queries: expected a dict of query id -> text (a run names each query by its id), got list"),
    ({}, "queries: no queries in the dict"),
    ({"1": "x", 2: None}, "queries[2]: a query must be a string, found NoneType"),
    ({("a",): "x"}, "queries[('a',)]: a query id must be a string or an integer, found tuple ('a',)"),
    ({1.0: "x"}, "queries[1.0]: a query id must be a string or an integer, found float 1.0"),
    ({"q 1": "x"}, "queries['q 1']: query id 'q 1' contains whitespace"),
    ({"1": "x", " 1": "y"}, "queries[' 1']: duplicate query id '1' (first at queries['1'])"),
    ({"1": " "}, "queries['1']: query '1' has no text"),
])
def test_bad_queries_in_memory_name_the_query(queries, message):
    assert str(error_of(read_query_mapping, queries)) == message


def test_unknown_format(tmp_path):
    path = write(tmp_path / "c.tsv", "d1\ttext\n")
    err = error_of(read_corpus, path, fmt="xml")
    assert_names(err, path, None)
    assert "unknown corpus format 'xml'" in str(err)
    path = write(tmp_path / "c.dat", "\njust words\n")
    assert_names(error_of(read_corpus, path), path, 2)  # cannot be sniffed


def test_empty_corpus(tmp_path):
    path = write(tmp_path / "c.tsv", "\n \n")
    err = error_of(read_corpus, path)
    assert_names(err, path, None)
    assert "no documents" in str(err)
    path = write(tmp_path / "c.dat", "")
    assert "empty corpus file" in str(error_of(read_corpus, path))


def test_duplicate_docid_names_both_lines(tmp_path):
    path = write(tmp_path / "c.tsv", "a\tx\nb\ty\n\n a \tz\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 4)
    assert "duplicate docid 'a' (first at line 1)" in str(err)


def test_duplicate_docid_in_trec(tmp_path):
    path = write(tmp_path / "d.trec", "<DOC>\n<DOCNO>7</DOCNO>\n</DOC>\n<DOC>\n<DOCNO>7</DOCNO>\n</DOC>\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 4)
    assert "first at line 1" in str(err)


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"d1\tfine\nd2\tbad \xff byte\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 2)
    assert "invalid UTF-8" in str(err)


def test_a_lone_surrogate_escape_in_jsonl_names_the_line(tmp_path):
    """JSON may escape half a surrogate pair (\\ud800): not Unicode text, so it failed later with a
    traceback from Arrow (index) or the run writer (queries); the pair itself is text."""
    from indexer.readers import read_queries

    path = write(tmp_path / "c.jsonl", '{"_id": "ok", "text": "pair \\ud83d\\ude00"}\n{"_id": "x", "title": "lone \\ud800"}\n')
    err = error_of(read_corpus, path)
    assert_names(err, path, 2)
    assert "field 'title' holds a lone surrogate (\\ud800)" in str(err)
    queries = write(tmp_path / "q.jsonl", '{"_id": "s\\udc00", "text": "apple"}\n')
    assert_names(error_of(read_queries, queries), queries, 1)


def test_empty_and_spaced_docids(tmp_path):
    path = write(tmp_path / "c.tsv", "d1\tx\n\ty\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 2)
    assert "empty docid" in str(err)
    path = write(tmp_path / "e.jsonl", '{"_id": "a b", "text": "x"}\n')
    assert "contains whitespace" in str(error_of(read_corpus, path))


def test_trec_structure_errors(tmp_path):
    path = write(tmp_path / "a.trec", "<DOC>\n<DOCNO>1</DOCNO>\n<DOC>\n")
    assert_names(error_of(read_corpus, path), path, 3)
    path = write(tmp_path / "b.trec", "<DOC>\n<DOCNO>1</DOCNO>\ntext\n")
    err = error_of(read_corpus, path)
    assert "never closed" in str(err)
    assert_names(err, path, 1)  # the line the unclosed <DOC> opens, not the file's last
    path = write(tmp_path / "c.trec", "<DOC>\ntext without id\n</DOC>\n")
    assert_names(error_of(read_corpus, path), path, 1)
    path = write(tmp_path / "d.trec", "<DOC><DOCNO>1</DOCNO></DOC>\nstray\n")
    assert_names(error_of(read_corpus, path), path, 2)
    path = write(tmp_path / "e.trec", "<DOC>\n<DOCNO>1</DOCNO>\none\n<DOCNO>2</DOCNO>\ntwo\n</DOC>\n")
    err = error_of(read_corpus, path)
    assert_names(err, path, 1)
    assert "two <DOCNO>s" in str(err)


def test_smart_text_before_record(tmp_path):
    path = write(tmp_path / "x.smart", "junk\n.I 1\n.W\ntext\n")
    assert_names(error_of(read_corpus, path), path, 1)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "c.tsv.gz"
    path.write_bytes(gzip.compress(b"".join(b"d%d\ttext\n" % i for i in range(1000)))[:60])
    assert "corrupt gzip" in str(error_of(read_corpus, path, fmt="tsv"))


def test_other_compressions_and_utf16_are_named(tmp_path):
    """A bzip2, xz, zstd or zip file, or UTF-16 text (Windows' "Unicode"), was reported as "invalid
    UTF-8 (byte 0 of the line)", which points at the text's encoding: each is named, with the fix."""
    import bz2
    import lzma
    import zipfile

    text = b"".join(b"q%d\tquery number %d\n" % (i, i) for i in range(50))
    archive = tmp_path / "q.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("q.tsv", text)
    files = {
        "bzip2": write_bytes(tmp_path / "q.tsv.bz2", bz2.compress(text)),
        "xz": write_bytes(tmp_path / "q.tsv.xz", lzma.compress(text)),
        "zstd": write_bytes(tmp_path / "q.tsv.zst", b"\x28\xb5\x2f\xfd" + bytes(20)),  # zstd's frame magic
        "zip": archive,
        "UTF-16": write_bytes(tmp_path / "q16.tsv", text.decode().encode("utf-16")),
    }
    for name, path in files.items():
        for reader in (read_queries, read_corpus, read_qrels, load_orcas):
            err = error_of(reader, path)
            assert_names(err, path, None)
            assert name in str(err) and "invalid UTF-8" not in str(err)
    assert len(read_queries(write_bytes(tmp_path / "q.tsv.gz", gzip.compress(text)))) == 50  # gzip is read
    assert read_queries(write_bytes(tmp_path / "bz.tsv", b"BZh9\tstarts like bzip2\n")) == {"BZh9": "starts like bzip2"}


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_missing_file_is_reported_at_call(tmp_path):
    for fmt in (None, "tsv"):
        with pytest.raises(InputError) as info:
            read_corpus(tmp_path / "nope.tsv", fmt=fmt)  # not iterated
        assert_names(info.value, tmp_path / "nope.tsv", None)
        assert "no such file" in str(info.value)


def test_query_errors(tmp_path):
    path = write(tmp_path / "q.tsv", "1\ta\n2\tb\n1\tc\n")
    err = error_of(read_queries, path)
    assert_names(err, path, 3)
    assert "first at line 1" in str(err)
    path = write(tmp_path / "r.tsv", "1\ta\n2\t  \n")
    assert_names(error_of(read_queries, path), path, 2)
    path = write(tmp_path / "s.tsv", "1\ta\tb\n")
    assert_names(error_of(read_queries, path), path, 1)
    path = write(tmp_path / "t.trec", "<top>\n<num>1</num>\n</top>\n")
    assert "without <title>" in str(error_of(read_queries, path))
    path = write(tmp_path / "u.jsonl", '{"text": "no id"}\n')
    assert_names(error_of(read_queries, path), path, 1)


def test_qrels_errors(tmp_path):
    path = write(tmp_path / "a.txt", "q1 0 d1 1\nq1 0 d2\n")
    assert_names(error_of(read_qrels, path), path, 2)
    path = write(tmp_path / "b.txt", "q1 0 d1 1\nq1 0 d2 high\n")
    err = error_of(read_qrels, path)
    assert_names(err, path, 2)
    assert "relevance must be an integer" in str(err)
    path = write(tmp_path / "c.txt", "1 2 1\n")
    assert "--qrels-format" in str(error_of(read_qrels, path))  # space-separated 3 columns are ambiguous
    path = write(tmp_path / "cranqrel", "1 2 1\n1 3 7\n")
    assert_names(error_of(read_qrels, path), path, 2)
    path = write(tmp_path / "cranqrel.tsv", "1\t2\t1\n")  # BEIR's separator, Cranfield's name: the gains differ
    err = error_of(read_qrels, path)
    assert "tab-separated 3-column qrels named like Cranfield's" in str(err) and "--qrels-format" in str(err)
    assert read_qrels(path, "cranfield") == {"1": {"2": 4}} and read_qrels(path, "beir") == {"1": {"2": 1}}
    path = write(tmp_path / "d.txt", "q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n")
    err = error_of(read_qrels, path)
    assert_names(err, path, 3)
    assert "first at line 1" in str(err)
    path = write(tmp_path / "e.txt", "q1 0 d1 1\n")
    assert "unknown qrels format" in str(error_of(read_qrels, path, fmt="csv"))
    assert "empty qrels" in str(error_of(read_qrels, write(tmp_path / "f.txt", "\n")))



@pytest.mark.parametrize(("name", "text", "line", "message"), [
    ("q.jsonl", '{"_id": "q1", "text": "x"}\n"a string"\n', 2, "expected a JSON object, found str"),
    ("nonum.trec", "<top>\n<title> hello\n</top>\n", 1, "<top> without <num>"),
    ("closed.trec", "<top>\n<num> 1\n<title> hi\n</top>\n</top>\n", 5, "</top> without an opening <top>"),
    ("blank.tsv", "\n\n", None, "no queries in file"),
])
def test_bad_query_files_name_file_and_line(tmp_path, name, text, line, message):
    path = write(tmp_path / name, text)
    err = error_of(read_queries, path)
    assert_names(err, path, line)
    assert message in str(err)


@pytest.mark.parametrize(("name", "text", "line", "message"), [
    ("five.txt", "q1 0 d1 1 extra\n", 1, "expected 4 qrels columns (TREC) or 3 (BEIR, Cranfield), found 5"),
    ("beir.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\t9\n", 3,
     "expected 3 BEIR qrels columns (query-id, corpus-id, score), found 4"),
    ("cranqrel", "1 184 2\n1 29\n", 2, "expected 3 Cranfield qrels columns (qid, docid, code), found 2"),
])
def test_bad_qrels_rows_name_file_and_line(tmp_path, name, text, line, message):
    path = write(tmp_path / name, text)
    err = error_of(read_qrels, path)
    assert_names(err, path, line)
    assert message in str(err)


@pytest.mark.parametrize("reader", [read_queries, read_qrels])
def test_a_folder_given_as_a_file_is_named(tmp_path, reader):
    err = error_of(reader, tmp_path)
    assert_names(err, tmp_path, None)
    assert str(err).endswith("is a directory, expected a file")

def test_qrels_grades_are_plain_integers_within_a_million(tmp_path):
    """99999999999999999999 was a SystemError traceback in pytrec_eval, 4294967297 scored as another
    grade and 2147483647 took a minute and gigabytes there; '1_0' read as 10 (Python's int), where
    trec_eval reads 1."""
    for grade, why in (("99999999999999999999", "relevance 99999999999999999999 is out of range"),
                       ("4294967297", "is out of range"), ("1000001", "is out of range (at most 1,000,000"),
                       ("-1000001", "is out of range"), ("1_0", "relevance must be an integer, found '1_0'"),
                       ("\u0663", "relevance must be an integer"), ("1e3", "must be an integer")):
        path = write(tmp_path / "q.txt", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
        err = error_of(read_qrels, path)
        assert_names(err, path, 2)
        assert why in str(err)
    path = write(tmp_path / "ok.txt", "q1 0 d1 1000000\nq1 0 d2 -1000000\nq1 0 d3 +2\nq1 0 d4 -0\n")
    assert read_qrels(path) == {"q1": {"d1": 10**6, "d2": -(10**6), "d3": 2, "d4": 0}}


def test_a_pipe_is_refused_before_it_is_read(tmp_path):
    """Readers open a file more than once (format detection, a repeated id's first line): a named
    pipe, as ``<(...)`` gives, is refused by name instead of read as empty the second time."""
    import os

    from indexer.readers import read_qrels, read_queries

    pipe = tmp_path / "queries.tsv"
    os.mkfifo(pipe)
    for reader in (read_queries, read_qrels, read_corpus):
        err = error_of(reader, pipe)
        assert "is a pipe" in str(err) and str(pipe) in str(err)


def test_orcas_clicks_that_match_no_document_are_refused(tmp_path):
    """Clicks for documents the corpus lacks are dropped, but a file none of whose docids is in the
    corpus (another id scheme, the wrong file) is named instead of leaving every field empty."""
    corpus = write(tmp_path / "c.tsv", "D1\tsome text\nD2\tother text\n")
    other = write(tmp_path / "o.tsv", "d1\tlower-case ids\nX9\tnot here\n")
    err = error_of(lambda p: list(read_corpus(corpus, orcas=p)), other)
    assert str(other) in str(err) and "no document of the corpus" in str(err)
    some = write(tmp_path / "s.tsv", "D2\tclicked\nX9\tnot here\n")
    assert [d.orcas for d in read_corpus(corpus, orcas=some)] == ["", "clicked"]


def test_query_text_falls_back_past_blank_fields_and_topics_decode_entities(tmp_path):
    path = write(tmp_path / "q.jsonl", '{"_id": "1", "text": "", "title": "microwave"}\n{"_id": "2", "query": " ", "title": "ovens"}\n')
    assert read_queries(path) == {"1": "microwave", "2": "ovens"}
    path = write(tmp_path / "t.trec", "<top>\n<num> Number: 7\n<title> AT&amp;T phones\n</top>\n")
    assert read_queries(path) == {"7": "AT&T phones"}


def test_a_raw_tab_in_json_is_named_once(tmp_path):
    path = write(tmp_path / "q.jsonl", '{"_id": "1", "text": "a\tb"}\n')
    message = str(error_of(read_queries, path))
    assert "Invalid control character at column" in message and "at at" not in message


def test_a_tsv_queries_header_is_not_a_query(tmp_path):
    path = write(tmp_path / "q.tsv", "qid\ttext\n1\tmicrowave\n")
    assert read_queries(path) == {"1": "microwave"}
    path = write(tmp_path / "q2.tsv", "1\tqid text\nqid\ttext\n")  # only a first line can be a header
    assert read_queries(path) == {"1": "qid text", "qid": "text"}


def test_tag_pairs_are_found_as_the_lazy_regex_finds_them():
    """TREC tags are paired by a linear scan (the lazy regex searched to the end of the document from
    every unclosed tag: 40,000 unclosed <head> tags took 2 minutes); its spans are the regex's."""
    import random
    import re

    from indexer.readers.corpus import paired

    regex = re.compile(r"<(TITLE|HEADLINE|HEAD)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)
    opening = re.compile(r"<(TITLE|HEADLINE|HEAD)>", re.IGNORECASE)
    pieces = ["<title>", "</title>", "<HEAD>", "</head>", "<Headline>", "</HEADLINE>", "x", " ", "\n", "<head", "</"]
    rng = random.Random(0)
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30)))
        expected = [(m.start(), m.start(2), m.end(2), m.end()) for m in regex.finditer(text)]
        assert paired(text, opening, lambda m: f"</{m.group(1)}>") == expected, text


def test_a_line_over_the_cap_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    """A file without line breaks (a JSON array, a gzip bomb of one line) was read whole into memory
    before anything was checked: 6 GiB of one gzip line passed 4 GB."""
    from indexer.readers import formats

    monkeypatch.setattr(formats, "MAX_LINE_BYTES", 100)
    ok = "d1\t" + "x" * 96  # 100 bytes with its line break: at the cap
    for name, opener in (("c.tsv", open), ("c.tsv.gz", gzip.open)):
        path = tmp_path / name
        with opener(path, "wt") as f:
            f.write(f"{ok}\nd2\t{'word ' * 400}\nd3\tlast\n")
        err = error_of(read_corpus, path)
        assert_names(err, path, 2)
        assert "line longer than 100 bytes: a file without line breaks?" in str(err)
    read: list[int] = []
    monkeypatch.setattr(formats, "open_binary", lambda p: _CountingStream(open(p, "rb"), read))
    with pytest.raises(InputError):
        list(formats.iter_lines(tmp_path / "c.tsv"))
    assert read == [100, 101]  # the first line, then the cap and one byte of the second: never all of it


class _CountingStream:
    def __init__(self, stream, read):
        self.stream, self.read = stream, read

    def readline(self, limit=-1):
        line = self.stream.readline(limit)
        self.read.append(len(line))
        return line

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()


def test_a_file_with_carriage_returns_but_no_line_feeds_is_refused_with_a_hint(tmp_path):
    """Old Mac (CR-only) line ends read as one line: a TSV corpus of three documents was indexed as
    one, its others taken for the url, title and body of the first (4 columns)."""
    cr_only = "d1\thello cells\rd2\tgenes here\rd3\tthird\r"
    for name, opener in (("c.tsv", open), ("c.tsv.gz", gzip.open)):
        path = tmp_path / name
        with opener(path, "wt", newline="") as f:
            f.write(cr_only)
        err = error_of(read_corpus, path)
        assert_names(err, path, 1)
        assert "carriage returns but no line feeds" in str(err)
    fine = tmp_path / "fine.tsv"  # CRLF line ends, and a last line ended by a CR alone, read as before
    fine.write_bytes(b"d1\thello cells\r\nd2\tgenes here\r")
    assert [(d.docid, d.text) for d in read_corpus(fine)] == [("d1", "hello cells"), ("d2", "genes here")]


def test_xml_topics_of_the_web_tracks_and_trec_covid_read_their_query(tmp_path):
    """<topic number="1"> ... <query> topics (Web tracks, TREC-COVID): the query is <query>, not the
    description or a subtopic; the number attribute is the qid, as their qrels name it."""
    path = write(tmp_path / "topics-rnd5.xml", (
        '<?xml version="1.0" encoding="UTF-8"?>\n<topics>\n'
        '<topic number="1">\n  <query>coronavirus origin</query>\n'
        '  <question>what is the origin of COVID-19</question>\n  <narrative>seeking range</narrative>\n</topic>\n'
        "<topic number='2' type=\"faceted\"><query>AT&amp;T  phone\n plans</query>\n"
        '  <description>find plans</description>\n'
        '  <subtopic number="1" type="nav">a subtopic</subtopic>\n</topic>\n</topics>\n'
    ))
    assert read_queries(path) == {"1": "coronavirus origin", "2": "AT&T phone plans"}
    assert read_queries(path, fmt="trec") == read_queries(path)
    missing = write(tmp_path / "no-query.xml", '<topics>\n<topic number="3">\n<description>x</description>\n</topic>\n')
    with pytest.raises(InputError, match=r"no-query.xml:2: <topic> without <query>"):
        read_queries(missing)
    unnumbered = write(tmp_path / "no-number.xml", "<topic>\n<query>x</query>\n</topic>\n")
    with pytest.raises(InputError, match=r"no-number.xml:1: <topic> without a number attribute"):
        read_queries(unnumbered)
