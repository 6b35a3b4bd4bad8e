import numpy as np
import pytest

from ckqti.errors import InputError, OptionError
from ckqti.text import Analyzer
from ckqti.train.data import (
    bounded_vocabulary,
    judgement_notes,
    load_collection,
    read_training_inputs,
    require_texts,
    split_dev,
    wordless_notes,
)
from ckqti.train.pseudo import title_pseudo_queries
from ckqti.vocab import Vocabulary


def test_split_dev_is_disjoint_seeded_and_sized():
    qrels = {str(i): {"d": 1} for i in range(50)}
    train, dev = split_dev(qrels, 0.1, seed=3)
    assert len(dev) == 5 and len(train) == 45 and not set(train) & set(dev)
    assert split_dev(qrels, 0.1, seed=3) == (train, dev)
    assert split_dev(qrels, 0.1, seed=4)[1] != dev
    with pytest.raises(InputError):
        split_dev({"1": {"d": 1}}, 0.5, seed=0)


def test_split_dev_takes_dev_from_queries_relevant_at_the_level():
    """Grade 1 is not relevant at level 2 (TREC DL): such a query stays in train, never in dev."""
    qrels = {**{f"a{i}": {"d": 2, "e": 1} for i in range(10)}, **{f"b{i}": {"d": 1} for i in range(10)}}
    train, dev = split_dev(qrels, 0.5, seed=0, min_grade=2)
    assert len(dev) == 5 and all(q.startswith("a") for q in dev) and set(train) | set(dev) == set(qrels)
    assert any(q.startswith("b") for q in split_dev(qrels, 0.5, seed=0)[1])  # level 1: any of the 20
    with pytest.raises(InputError, match=r"^qrels\.txt: need at least 2 queries with a relevant judgement \(grade >= 3\) "
                                         r"to carve a dev split; 0 of the 20 judged queries have one \(20 at --rel-level "
                                         r"1\); judge more$"):
        split_dev(qrels, 0.5, seed=0, min_grade=3, path="qrels.txt", hint="; judge more")


def test_relevant_documents_are_those_judged_at_the_level_and_in_the_corpus():
    """A grade at ``min_grade`` is relevant (TREC DL passages: 2), one below it is not; a judged docid
    the corpus lacks is dropped, and a query left with none keeps an empty set."""
    from ckqti.train.data import relevant_docs

    qrels = {"q1": {"a": 2, "b": 1, "c": 0, "gone": 2}, "q2": {"b": 1}}
    index = {"a": 0, "b": 1, "c": 2}
    assert relevant_docs(qrels, index) == {"q1": frozenset({0, 1}), "q2": frozenset({1})}
    assert relevant_docs(qrels, index, min_grade=2) == {"q1": frozenset({0}), "q2": frozenset()}


def test_bounded_vocabulary_maps_rare_terms_to_unknown():
    vocab = Vocabulary.build([["a", "b", "c"], ["a", "b"], ["a"]])
    small, remap = bounded_vocabulary(vocab, min_df=2)
    assert small.terms == ["[PAD]", "[UNK]", "a", "b"]
    assert remap[vocab.id("c")] == 1 and remap[vocab.id("b")] == small.id("b")
    assert small.df[small.id("a")] == 3 and small.num_docs == 3


def test_collection_matches_the_index_analysis(tiny_scifact):
    coll = load_collection(tiny_scifact["corpus"])
    analyzer = Analyzer()
    first = coll.docids[0]
    assert [coll.vocab.terms[i] for i in coll.doc(0)] == analyzer(tiny_scifact["docs"][first])
    assert len(coll) == len(tiny_scifact["docs"]) == coll.vocab.num_docs


def test_titles_become_pseudo_queries_for_their_own_documents():
    queries, qrels = title_pseudo_queries(["d1", "d2", "d3"], ["Aspirin lowers fever", "The", ""], Analyzer())
    assert queries == {"title:d1": "Aspirin lowers fever"}
    assert qrels == {"title:d1": {"d1": 1}}


def test_title_pseudo_queries_need_titles():
    """A corpus without titles (a TSV corpus) gives no pseudo-query: an error, not a silent no-op."""
    from ckqti.errors import InputError

    with pytest.raises(InputError, match="no document has a title of 2 or more terms"):
        title_pseudo_queries(["d1", "d2"], ["", "The"], Analyzer())


def test_judgement_notes_count_what_training_cannot_use():
    """Judgements of documents outside the corpus were dropped without a word: with zero-padded
    docids against plain ones (Vaswani's qrels against a corpus written with '%05d' ids) a model
    trained on 12% of its judgements and said nothing. Negative grades are not relevant, as in eval."""
    docs = {"001": 0, "002": 1, "d3": 2}
    qrels = {
        "q1": {"1": 2, "2": 0, "001": 1},  # '1' and '2' are not '001' and '002'
        "q2": {"gone": 1, "d3": -2},  # its only relevant document is not in the corpus
        "q3": {"d3": 0, "002": -1},  # no relevant judgement at all
        "q4": {"002": 3},
    }
    assert judgement_notes(qrels, docs) == [
        "3 of the 8 judgements (2 relevant) name a document not in the corpus and are ignored "
        "(first: '1'; the corpus has '001': ids are compared as written)",
        "1 of the 4 judged queries have no judgement of grade 1 or more (first: 'q3')",
        "1 of the 4 judged queries have no relevant document in the corpus (first: 'q2')",
    ]
    assert judgement_notes({"q4": {"002": 3}, "q1": {"001": 1}}, docs) == []
    assert judgement_notes(qrels, docs, min_grade=3) == [  # q1's '1' (grade 2) is not relevant at level 3
        "3 of the 8 judgements (0 relevant) name a document not in the corpus and are ignored "
        "(first: '1'; the corpus has '001': ids are compared as written)",
        "3 of the 4 judged queries have no judgement of grade 3 or more (first: 'q1')",
    ]


def test_judged_queries_without_text_name_the_queries_file_and_a_zero_padded_spelling():
    with pytest.raises(InputError, match=r"^queries\.tsv: 2 of the 3 judged queries have no text in the queries file "
                                         r"\(first: '7'; the queries file has '007': ids are compared as written\)$"):
        require_texts(["7", "8", "q9"], {"007": "a", "q9": "b"}, "queries.tsv")
    with pytest.raises(InputError, match=r"\(first: 'x'\)$"):
        require_texts(["x"], {"1": "a"})
    require_texts(["1"], {"1": "a", "2": "b"})


def test_wordless_notes_name_training_queries_of_which_no_term_is_known():
    ids = {"a": np.array([5, 1]), "b": np.array([1, 1]), "c": np.array([], dtype=np.int64)}
    assert wordless_notes(["a", "b", "c"], ids) == [
        "2 of the 3 training queries have no term in the vocabulary and are skipped (first: 'b')"]
    assert wordless_notes(["a"], ids) == []


def test_split_dev_sizes_round_and_always_leave_both_sides_a_query():
    """The dev split is the nearest count to the fraction, at least 1 query and never every query;
    it depends on the set of query ids and the seed, not on the order the qrels list them."""
    qrels = {f"q{i}": {"d": 1} for i in range(7)}
    for fraction, n_dev in ((0.25, 2), (0.01, 1), (0.99, 6)):  # 1.75 -> 2; 0.07 -> 1; 6.93 -> 7 -> 6
        train, dev = split_dev(qrels, fraction, seed=1)
        assert (len(train), len(dev)) == (7 - n_dev, n_dev)
    assert [len(part) for part in split_dev({"a": {"d": 1}, "b": {"d": 1}}, 0.9, seed=0)] == [1, 1]
    assert split_dev(dict(reversed(qrels.items())), 0.25, seed=1)[1] == split_dev(qrels, 0.25, seed=1)[1]


def test_candidates_keep_the_first_depth_in_the_corpus_and_queries_their_first_terms():
    from ckqti.train.data import analyze_queries, candidate_indices

    index = {"a": 0, "b": 1, "c": 2}
    assert candidate_indices({"q": ["a", "gone", "b", "c"]}, index, 2) == {"q": [0, 1]}
    assert candidate_indices({"q": ["c", "a"]}, index, 100) == {"q": [2, 0]}
    vocab = Vocabulary.build([["aspirin", "fever", "child"]])
    ids = analyze_queries({"q": "Aspirin lowers fever in children"}, Analyzer(), vocab, 2)["q"]
    assert ids.tolist() == [vocab.id("aspirin"), 1]  # 'lower' is not in the vocabulary: unknown


def test_two_term_titles_are_queries_and_pseudo_queries_are_drawn_without_repeats():
    from ckqti.train.pseudo import draw_pseudo

    queries, _ = title_pseudo_queries(["d1"], ["Aspirin fever"], Analyzer())
    assert queries == {"title:d1": "Aspirin fever"}  # min_terms=2: two terms are enough
    qids = [f"title:d{i}" for i in range(10)]
    drawn = draw_pseudo(qids, 6, np.random.default_rng(0))
    assert len(set(drawn)) == 6 and drawn == sorted(drawn, key=qids.index)
    assert draw_pseudo(qids, None, np.random.default_rng(0)) == qids == draw_pseudo(qids, 50, np.random.default_rng(0))


def test_inputs_digest_reads_arrays_and_files_by_content(tmp_path):
    """A resumed run is refused when what it read differs: an array's values (an edited corpus of the
    same size) and a file's content under the same name (a rewritten teacher file) change the digest."""
    from pathlib import Path

    from ckqti.train.data import inputs_digest

    assert inputs_digest(np.array([1, 2], np.int32)) != inputs_digest(np.array([1, 3], np.int32))
    assert inputs_digest([np.array([1, 2])], {"a": 1}) != inputs_digest([np.array([1, 3])], {"a": 1})
    teacher = tmp_path / "teacher.json"
    teacher.write_text('{"scores": {}}')
    before = inputs_digest(Path(teacher))
    assert inputs_digest(Path(teacher)) == before
    teacher.write_text('{"scores": {"q": {}}}')
    assert inputs_digest(Path(teacher)) != before


def test_training_queries_are_read_in_the_format_given(tmp_path):
    """``queries_format`` reads a queries file whatever its name says (TSV under a JSONL name); a dict of
    queries takes none."""
    queries, qrels = tmp_path / "queries.jsonl", tmp_path / "qrels.txt"
    queries.write_text("q1\tcancer cells\nq2\tbrain imaging\n")
    qrels.write_text("q1 0 d1 1\n")
    assert read_training_inputs(queries, qrels, queries_format="tsv") == (
        {"q1": "cancer cells", "q2": "brain imaging"}, {"q1": {"d1": 1}})
    with pytest.raises(InputError, match="bad JSON"):
        read_training_inputs(queries, qrels)
    with pytest.raises(OptionError, match="^queries_format is for a queries file; a dict of queries is read as it is$"):
        read_training_inputs({"q1": "cancer"}, qrels, queries_format="tsv")
