"""Vocabulary files: what ``save`` writes, ``load`` reads; anything else is one line naming the file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ckqti.errors import InputError
from ckqti.vocab import PAD, UNK, Vocabulary


def test_a_saved_vocabulary_loads_as_it_was(tmp_path):
    vocab = Vocabulary.build([["cell", "membrane"], ["cell"]])
    vocab.save(tmp_path / "vocab.json")
    back = Vocabulary.load(tmp_path / "vocab.json")
    assert back.terms == vocab.terms and back.df.tolist() == [0, 0, 2, 1] and back.num_docs == 2
    assert back.id("cell") == 2 and back.id("zeta") == UNK


@pytest.mark.parametrize("terms", [["cell", "membrane", "wall"], ["[UNK]", "[PAD]", "cell"], ["[PAD]"]])
def test_a_vocabulary_without_pad_and_unk_first_is_refused(tmp_path, terms):
    """Ids 0 and 1 are padding and unknown everywhere: a file without ``[PAD]`` and ``[UNK]`` first
    loaded, and its first two real terms were then read as padding and unknown."""
    path = tmp_path / "vocab.json"
    n = len(terms)
    path.write_text(json.dumps({"terms": terms, "df": [1] * n, "cf": [1] * n, "num_docs": 1, "total_terms": n}))
    with pytest.raises(InputError) as e:
        Vocabulary.load(path)
    assert str(e.value) == (f"{path}: a vocabulary's first terms must be '[PAD]' and '[UNK]' (ids {PAD} and {UNK}), "
                            f"found {terms[:2]!r}")


@pytest.mark.parametrize("text", ['{"terms": ["[PAD]", "[UNK]"', '{"terms": ["[PAD]", "[UNK]"]}', "[1, 2]", "\xff"])
def test_a_file_that_is_no_vocabulary_is_one_line_naming_it(tmp_path, text):
    path = tmp_path / "vocab.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match="not a vocabulary file") as e:
        Vocabulary.load(path)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["df", "cf"])
def test_counts_that_do_not_match_the_terms_are_refused(tmp_path, name):
    """``df`` and ``cf`` hold a count per term id; a shorter list loaded, to fail later far from the file."""
    path = tmp_path / "vocab.json"
    row = {"terms": ["[PAD]", "[UNK]", "cell"], "df": [0, 0, 1], "cf": [0, 0, 1], "num_docs": 1, "total_terms": 1}
    path.write_text(json.dumps({**row, name: [0, 0]}))
    with pytest.raises(InputError) as e:
        Vocabulary.load(path)
    assert str(e.value) == f"{path}: a vocabulary's {name} must hold one count per term: 3 terms, {name} of shape (2,)"
    path.write_text(json.dumps({**row, name: [0, 0, 1, 1]}))  # one count too many: another vocabulary's
    with pytest.raises(InputError, match=rf"3 terms, {name} of shape \(4,\)$"):
        Vocabulary.load(path)


def test_counts_and_idf_of_a_built_vocabulary():
    """df counts documents, cf occurrences; idf is NDRM2's ``max(log((N - df + 0.5) / (df + 0.5)), 0)``
    (SPEC), 0 for the reserved ids and for a term in more than half of the documents."""
    vocab = Vocabulary.build([["cell", "cell", "wall"], ["cell", "gene"], ["cell"], ["wall"]])
    assert vocab.terms == ["[PAD]", "[UNK]", "cell", "wall", "gene"]
    assert vocab.df.tolist() == [0, 0, 3, 2, 1] and vocab.cf.tolist() == [0, 0, 4, 2, 1]
    assert (vocab.num_docs, vocab.total_terms, vocab.mean_doc_length) == (4, 7, 1.75)
    assert vocab.idf().tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0, math.log(3.5 / 1.5)])


def test_documents_counted_as_a_batch_count_as_one_at_a_time():
    """A build counts a batch of documents at once (term ids one after another, with each
    document's length): the same df, cf, document count and total length as :meth:`add_document`
    for each, a term repeated inside a document counted once in its df, an empty document too."""
    docs = [["cell", "cell", "wall"], [], ["gene", "cell"], ["wall", "wall", "wall"], ["zeta"]]
    one = Vocabulary()
    ids = [one.add_document(d) for d in docs]
    batch = Vocabulary()
    assert [[batch.add_term(t) for t in d] for d in docs] == ids
    for part in (slice(0, 2), slice(2, 5)):
        batch.count_documents(np.array([i for d in ids[part] for i in d], np.int32), [len(d) for d in ids[part]])
    assert batch.terms == one.terms and batch.num_docs == one.num_docs == 5 and batch.total_terms == one.total_terms
    batch, one = batch.trimmed(), one.trimmed()  # (their arrays grow by doubling: capacities differ)
    assert batch.df.tolist() == one.df.tolist() == [0, 0, 2, 2, 1, 1]
    assert batch.cf.tolist() == one.cf.tolist() == [0, 0, 3, 4, 1, 1]
