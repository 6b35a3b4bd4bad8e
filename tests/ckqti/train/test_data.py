import numpy as np
import pytest

from ckqti.errors import InputError
from ckqti.text import Analyzer
from ckqti.train.data import bounded_vocabulary, load_collection, pad_rows, split_dev
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


def test_bounded_vocabulary_maps_rare_terms_to_unknown():
    vocab = Vocabulary.build([["a", "b", "c"], ["a", "b"], ["a"]])
    small, remap = bounded_vocabulary(vocab, min_df=2)
    assert small.terms == ["[PAD]", "[UNK]", "a", "b"]
    assert remap[vocab.id("c")] == 1 and remap[vocab.id("b")] == small.id("b")
    assert small.df[small.id("a")] == 3 and small.num_docs == 3


def test_pad_rows_truncates_and_pads():
    out = pad_rows([np.array([5, 6, 7]), np.array([8])], max_len=2)
    assert out.tolist() == [[5, 6], [8, 0]]
    assert pad_rows([np.array([], dtype=np.int64)]).tolist() == [[0]]


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
