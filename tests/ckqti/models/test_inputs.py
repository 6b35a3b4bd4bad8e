"""Text as a model reads it (ckqti.models.inputs): terms and pieces with their characters."""

from __future__ import annotations

import numpy as np
import pytest

from ckqti.models.inputs import WordPieceText, analyzed_spans, pad_rows
from ckqti.text import Analyzer


@pytest.mark.parametrize("text", [
    "The BRCA1 gene's role in DNA-repair: 12 cases (İstanbul, ﬁbrosis)!",
    "Vitamin D deficiency is associated with an increased risk of tuberculosis.",
    "",
])
def test_analyzed_spans_match_the_analyzer(text):
    analyzer = Analyzer()
    spans = analyzed_spans(analyzer, text)
    assert [s.token for s in spans] == analyzer(text)
    for s in spans:  # every span is the word the term was stemmed from
        assert analyzer(text[s.start:s.end]) == [s.token]


def test_spans_take_the_combining_marks_of_their_last_letter():
    """A decomposed accent (``e`` + U+0301) or a keycap's marks after a term's last letter belong to
    its span: a highlight ending before them left them on the closing bracket (``[cafe]\u0301``)."""
    text = "cafe\u0301 re\u0301sume\u0301 genes 1\ufe0f\u20e3 end"
    spans = analyzed_spans(Analyzer(), text)
    assert [(s.token, text[s.start:s.end]) for s in spans] == [
        ("cafe", "cafe\u0301"), ("re", "re\u0301"), ("sume", "sume\u0301"), ("gene", "genes"),
        ("1", "1\ufe0f\u20e3"), ("end", "end")]
    from ckqti.models.minilm import WordPieceTokenizer

    pieces = WordPieceText(WordPieceTokenizer.minilm()).spans(text)
    assert [(s.token, text[s.start:s.end]) for s in pieces][:2] == [("cafe", "cafe\u0301"), ("resume", "re\u0301sume\u0301")]
    assert all(a.end <= b.start for a, b in zip(pieces, pieces[1:]))


def test_pad_rows_truncates_and_pads():
    out = pad_rows([np.array([5, 6, 7]), np.array([8])], max_len=2)
    assert out.tolist() == [[5, 6], [8, 0]]
    assert pad_rows([np.array([], dtype=np.int64)]).tolist() == [[0]]


def test_a_piece_does_not_take_the_mark_the_next_piece_is():
    """A spacing mark the tokenizer keeps as a piece of its own (Devanagari's vowel sign in ``kaा``)
    stays that piece's: the piece before stops where it starts, so two highlights never overlap."""
    from ckqti.models.minilm import WordPieceTokenizer

    text = "ka\u093e gene"
    pieces = WordPieceText(WordPieceTokenizer.minilm()).spans(text)
    assert [(s.token, s.start, s.end) for s in pieces] == [("ka", 0, 2), ("##\u093e", 2, 3), ("gene", 4, 8)]


def test_a_wordpiece_checkpoint_s_vocabulary_is_the_whole_tokenizer():
    """IDCM saves its tokenizer as a vocabulary and reads it back: every token, in order, so the
    pieces (and ids) of any text are the same; a long text's length is all of its pieces."""
    from ckqti.models.inputs import tokenizer_from_vocabulary, wordpiece_vocabulary
    from ckqti.models.minilm import WordPieceTokenizer

    tok = WordPieceTokenizer.minilm()
    again = tokenizer_from_vocabulary(wordpiece_vocabulary(tok))
    assert again.vocab_size == tok.vocab_size
    assert again.tokens(range(tok.vocab_size)) == tok.tokens(range(tok.vocab_size))
    text = "Vitamin D deficiency and tuberculosis risk. " * 100  # ~800 pieces, past BERT's 512
    assert len(tok.encode(text)) > 600 and WordPieceText(again).length(text) == len(tok.encode(text))


def test_spans_of_an_analyzer_that_keeps_case_are_its_terms():
    """An analyzer that does not lower-case drops upper-case letters as separators; its spans must too
    (lower-cased spans would highlight terms the model never read)."""
    analyzer = Analyzer(stemmer="none", stopwords="none", lowercase=False)
    text = "Gene EXPRESSION in tumor Cells"
    spans = analyzed_spans(analyzer, text)
    assert [s.token for s in spans] == analyzer(text) == ["ene", "in", "tumor", "ells"]
    assert [text[s.start:s.end] for s in spans] == ["ene", "in", "tumor", "ells"]


def test_the_last_piece_takes_the_marks_that_end_the_text():
    """The last piece's span runs to the end of the text past its trailing combining marks, as every
    other piece's runs past its own (a highlight of ``résumé`` decomposed keeps its last accent)."""
    from ckqti.models.minilm import WordPieceTokenizer

    text = "gene re\u0301sume\u0301"
    pieces = WordPieceText(WordPieceTokenizer.minilm()).spans(text)
    assert [(s.token, text[s.start:s.end]) for s in pieces] == [("gene", "gene"), ("resume", "re\u0301sume\u0301")]


def test_ids_and_length_are_the_capped_ids_and_the_whole_length():
    from ckqti.models.inputs import TermText
    from ckqti.vocab import Vocabulary

    analyzer = Analyzer()
    text = TermText(analyzer, Vocabulary.build([analyzer("gene tumor cell growth")]))
    doc = "gene tumor cell growth gene tumor"
    ids, length = text.ids_and_length(doc, 2)
    assert ids.tolist() == text.ids(doc, 2).tolist() and len(ids) == 2 and length == text.length(doc) == 6


def test_spans_of_a_long_text_hold_little_beyond_the_spans():
    """A text that lower-casing keeps one character a character is spanned without a per-character map
    back to it: a 10 MB document's explanation peaked at 1 GB (about 7 times the spans it returns), most of
    it a list of one int and one string a character. A text holding a dotted capital I (lower-cased to two
    characters) still maps each back (test_analyzed_spans_match_the_analyzer)."""
    import tracemalloc

    text = "Vitamin D deficiency and bone fractures, 25(OH)D: a cohort. " * 4000  # 244,000 characters
    tracemalloc.start()
    try:
        spans = analyzed_spans(Analyzer(), text)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(spans) == 36000
    assert peak < 1.5 * held  # before: 4.7 times (28 MB for 5.9 MB of spans)
