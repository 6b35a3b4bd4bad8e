"""all-MiniLM-L6-v2 in plain torch: offline loading, tokenization, sentence vectors, masking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ckqti.errors import InputError
from ckqti.models.minilm import (
    BertConfig,
    BertEncoder,
    WordPieceTokenizer,
    load_minilm,
    minilm_model_dir,
    sentence_embeddings,
    with_special_tokens,
)

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


@pytest.fixture(scope="module")
def minilm() -> tuple[BertEncoder, WordPieceTokenizer]:
    return load_minilm().eval(), WordPieceTokenizer.minilm()


def scifact_texts(n: int) -> list[str]:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    with open(DATA / "scifact" / "corpus.jsonl") as f:
        return [json.loads(next(f))["text"] for _ in range(n)]


def test_loads_offline_with_the_known_shape(minilm):
    model, tok = minilm
    c = model.config
    assert (c.num_layers, c.hidden_size, c.num_heads, c.vocab_size) == (6, 384, 12, 30522)
    assert tok.vocab_size == 30522 and (tok.pad_id, tok.cls_id, tok.sep_id) == (0, 101, 102)
    emb = sentence_embeddings(model, tok, ["A man is eating food."])
    assert emb.shape == (1, 384)
    torch.testing.assert_close(emb.norm(dim=-1), torch.ones(1))


def test_similar_sentences_are_closer_than_dissimilar(minilm):
    model, tok = minilm
    e = sentence_embeddings(model, tok, [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The stock market fell sharply on Monday.",
    ])
    sim = e @ e.T
    assert sim[0, 1] > sim[0, 2] + 0.3
    assert sim[0, 1] > sim[1, 2] + 0.3


def test_tokenizer_matches_the_shipped_tokenizer_json():
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_model_dir() / "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    tok = WordPieceTokenizer.minilm()
    for text in scifact_texts(5) + ["Héllo wörld, it's 3.5 km!", "IL-2Rα+ T-cells (CD4+)"]:
        expected = reference.encode(text).ids
        assert expected[0] == tok.cls_id and expected[-1] == tok.sep_id
        assert tok.encode(text) == expected[1:-1]
    ids, offsets = tok.encode_with_offsets("Hello brave world")
    assert tok.tokens(ids) == ["hello", "brave", "world"] and offsets[1] == (6, 11)


TRICKY = [
    "word " * 3000,  # many short pieces: the first prefix is more than enough
    "x" * 50_000 + " tail",  # one huge word and no space until the end: the whole text
    "pneumonoultramicroscopicsilicovolcanoconiosis " * 400,  # long words, many pieces each
    ("Café  naïve\u00a0résumé\tİstanbul  " * 300).strip(),  # accents, odd spaces, dotted İ
    " " * 200 + "late start " * 100,
    "",
]


@pytest.mark.parametrize("cap", [1, 5, 200, 2000])
def test_capped_encoding_equals_the_whole_texts_first_pieces(cap):
    """encode(text, cap) tokenizes a prefix only; its pieces are the whole text's first cap."""
    tok = WordPieceTokenizer.minilm()
    texts = scifact_texts(200)
    long = [" ".join(texts[i : i + 40]) for i in range(0, 200, 40)]  # ~8,000 pieces each
    for text in texts + long + TRICKY:
        whole = tok.encode(text)
        assert tok.encode(text, cap) == whole[:cap]
    assert tok.encode_many(texts + long + TRICKY, cap) == [tok.encode(t)[:cap] for t in texts + long + TRICKY]
    assert tok.encode_many(TRICKY[:2]) == [tok.encode(t) for t in TRICKY[:2]]


def test_capped_encoding_reads_a_prefix_of_a_long_text(monkeypatch):
    tok = WordPieceTokenizer.minilm()
    text = " ".join(scifact_texts(60))  # ~15,000 pieces
    seen = []
    encode = tok._tok.encode
    monkeypatch.setattr(tok, "_tok", type("Spy", (), {
        "encode": lambda self, t, **kw: seen.append(len(t)) or encode(t, **kw)})())
    assert len(tok.encode(text, 100)) == 100
    assert max(seen) < len(text) / 20


def test_batch_and_special_tokens_pack_real_tokens_left():
    tok = WordPieceTokenizer.minilm()
    ids = tok.batch(["hello world", "hello"], max_length=8)
    assert ids.tolist() == [[7592, 2088], [7592, 0]]
    assert with_special_tokens(ids, 101, 102).tolist() == [[101, 7592, 2088, 102], [101, 7592, 102, 0]]
    assert tok.batch(["a b c d e"], max_length=3).shape == (1, 3)


LITERAL_SPECIALS = "see [SEP] and [PAD] here, [CLS] [MASK] [UNK]"


def test_literal_special_tokens_in_text_are_plain_text():
    tok = WordPieceTokenizer.minilm()
    specials = {tok.pad_id, tok.cls_id, tok.sep_id, tok.unk_id, 103}  # 103: [MASK]
    ids, offsets = tok.encode_with_offsets(LITERAL_SPECIALS)
    assert not specials & set(ids) and not specials & set(tok.encode(LITERAL_SPECIALS))
    assert not specials & set(tok.encode_many([LITERAL_SPECIALS], 8)[0])
    assert tok.tokens(ids[1:4]) == ["[", "sep", "]"]
    assert [LITERAL_SPECIALS[a:b] for a, b in offsets[5:8]] == ["[", "PAD", "]"]


def test_a_literal_pad_is_not_masked_out_of_a_sentence_vector(minilm):
    model, tok = minilm
    quoted, lower, dropped = sentence_embeddings(model, tok, ["kinase [PAD] inhibitors", "kinase [pad] inhibitors",
                                                              "kinase inhibitors"])
    torch.testing.assert_close(quoted, lower)  # uncased text: the same words
    assert not torch.allclose(quoted, dropped, atol=1e-3)


def test_padding_does_not_change_real_token_vectors(minilm):
    model, tok = minilm
    ids = with_special_tokens(tok.batch(["kinase inhibitors reduce tumour growth"], 16), 101, 102)
    padded = torch.nn.functional.pad(ids, (0, 7))
    with torch.no_grad():
        a = model(ids)
        b = model(padded)
    torch.testing.assert_close(b[:, : ids.shape[1]], a, atol=1e-5, rtol=1e-5)


def test_empty_rows_give_finite_vectors():
    model = BertEncoder(BertConfig(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16))
    out = model(torch.zeros(2, 5, dtype=torch.long))
    assert torch.isfinite(out).all()


def test_bad_inputs_raise_user_errors(tmp_path):
    with pytest.raises(InputError):
        load_minilm(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 10}))
    with pytest.raises((InputError, KeyError)):
        load_minilm(tmp_path)
    with pytest.raises(InputError):
        WordPieceTokenizer(tmp_path / "vocab.txt")
    with pytest.raises(ValueError):
        BertConfig(hidden_size=10, num_heads=3)


@pytest.mark.slow
def test_matches_sentence_transformers(minilm):
    """Same vectors as the sentence-transformers pipeline the package ships (if installed)."""
    st = pytest.importorskip("sentence_transformers")
    model, tok = minilm
    texts = scifact_texts(3) + ["A man is eating food."]
    reference = st.SentenceTransformer(str(minilm_model_dir()), device="cpu").encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(sentence_embeddings(model, tok, texts), reference.cpu(), atol=1e-5, rtol=1e-4)


def test_another_folder_of_the_files_can_stand_in_for_the_package(tmp_path, monkeypatch):
    """``$CKQTI_MINILM_DIR`` (a lent GPU without the package): the same files, weights in float16, load as float32."""
    from safetensors.torch import load_file, save_file

    src = minilm_model_dir()
    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(str(src / "model.safetensors")).items()},
              str(tmp_path / "model.safetensors"))
    monkeypatch.setenv("CKQTI_MINILM_DIR", str(tmp_path))
    assert minilm_model_dir() == tmp_path
    half, full = load_minilm(), load_minilm(src)
    assert WordPieceTokenizer.minilm().vocab_size == 30522
    for (name, a), (_, b) in zip(half.state_dict().items(), full.state_dict().items()):
        assert a.dtype == b.dtype, name
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)  # float16 rounding only
    monkeypatch.setenv("CKQTI_MINILM_DIR", str(tmp_path / "missing"))
    with pytest.raises(InputError, match="CKQTI_MINILM_DIR"):
        minilm_model_dir()


def test_weights_missing_a_tensor_or_with_one_too_many_are_refused(tmp_path):
    """A BERT folder in Hugging Face's names loads whole; a tensor short or one the encoder has no place
    for (a second layer's in a one-layer config) is a user error naming the weights, never a half-loaded model."""
    from safetensors.torch import save_file

    from ckqti.models.minilm import _EMBEDDING_NAMES, _LAYER_NAMES

    config = {"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 16, "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12}
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    model = BertEncoder(BertConfig.from_json(tmp_path / "config.json"))
    hf_names = {**{ours: theirs for theirs, ours in _EMBEDDING_NAMES.items()},
                **{f"layers.0.{ours}": f"encoder.layer.0.{theirs}" for theirs, ours in _LAYER_NAMES.items()}}
    hf = {}
    for name, tensor in model.state_dict().items():
        stem, _, leaf = name.rpartition(".")
        hf[f"{hf_names[stem]}.{leaf}"] = tensor.clone()
    save_file(hf, str(tmp_path / "model.safetensors"))
    loaded = load_minilm(tmp_path)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    for broken in ({k: v for k, v in hf.items() if k != "encoder.layer.0.output.dense.bias"},
                   {**hf, "encoder.layer.1.output.dense.bias": torch.zeros(8)}):
        save_file(broken, str(tmp_path / "model.safetensors"))
        with pytest.raises(InputError, match="weights do not match BERT"):
            load_minilm(tmp_path)


def test_an_input_may_fill_every_position_but_not_one_more_and_padding_is_in_the_vocabulary():
    config = BertConfig(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                        max_position_embeddings=16)
    model = BertEncoder(config)
    assert model(torch.ones(1, 16, dtype=torch.long)).shape == (1, 16, 8)
    with pytest.raises(ValueError, match="exceeds 16 positions"):
        model(torch.ones(1, 17, dtype=torch.long))
    assert BertConfig(vocab_size=50, pad_id=49).pad_id == 49
    with pytest.raises(ValueError, match="pad_id 50 outside"):
        BertConfig(vocab_size=50, pad_id=50)


def test_a_lone_surrogate_is_read_as_a_separator_not_a_type_error():
    """A Python string may hold lone surrogates (``json.loads('"\\udcff"')``, bytes decoded with
    ``surrogateescape``); the ``tokenizers`` library refuses such a string with a ``TypeError``,
    so IDCM's explain, rerank and score ended in a traceback where the analyzer of TK, TKL and NDRM
    reads the character as a separator (:meth:`ckqti.text.Analyzer.words`). The tokenizer reads it
    as a space too, every piece's offsets still in the text given."""
    tok = WordPieceTokenizer.minilm()
    text = "vitamin \udcff bone\ud800s \U0001F600"
    spaced = "vitamin   bone s \U0001F600"
    ids, offsets = tok.encode_with_offsets(text)
    assert (ids, offsets) == tok.encode_with_offsets(spaced)
    assert [text[a:b] for a, b in offsets] == ["vitamin", "bone", "s", "\U0001F600"]
    assert tok.encode(text) == tok.encode(spaced) == ids and tok.encode(text, 2) == ids[:2]
    assert tok.encode_many([text, "\udcff"], 3) == [ids[:3], []]
