"""The QTI model interface's helpers (ckqti.models.qti): document lengths and encoded batches."""

from __future__ import annotations

import torch

from ckqti.models.qti import DocumentEncoding, document_lengths


def test_a_document_s_length_counts_its_unknown_words_not_its_padding_unless_given():
    """Length normalisation reads every term of a document, words the vocabulary lacks (id 1) too;
    a true length given (a document cut at the model's cap) is used as is."""
    ids = torch.tensor([[5, 1, 1, 7, 0, 0], [1, 0, 0, 0, 0, 0]])
    assert document_lengths(ids).tolist() == [4.0, 1.0]
    assert document_lengths(ids, torch.tensor([40, 3])).tolist() == [40.0, 3.0]
    assert document_lengths(ids, dtype=torch.float64).dtype == torch.float64


def test_an_encoding_s_length_is_its_documents():
    ids = torch.tensor([[5, 1, 1, 7, 0, 0], [1, 0, 0, 0, 0, 0]])
    enc = DocumentEncoding(ids, ids != 0, document_lengths(ids))
    assert len(enc) == 2 and len(enc.to("cpu")) == 2 and enc.to("cpu").vectors is None
