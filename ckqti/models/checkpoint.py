"""The model checkpoint format, and loading a checkpoint to fill an index of any corpus.

A checkpoint is one ``torch.save`` file holding a dict (loaded with ``weights_only=True``:
tensors, strings, numbers, lists and dicts only)::

    format          "ckqti-checkpoint"     format_version  1
    kind            "ndrm1" | "ndrm2" | "ndrm3" (QTI: can fill an index), "tk" | "tkl" | "idcm"
    config          the model's config as a dict (e.g. NDRMConfig.to_dict())
    state_dict      parameter and buffer tensors (embedding matrices possibly float16)
    vocab           {"terms": [...], "df": int64 tensor, "cf": int64 tensor,
                     "num_docs": int, "total_terms": int}: the training vocabulary
    analyzer        Analyzer.to_dict() of the training text analysis
    fallback        how rows of words unseen in training are made: "minilm" or "mean"
    meta            training metadata and metrics (not part of the model's identity)
    content_hash    sha256 over kind, config, analyzer, fallback, vocabulary and tensors

The model id is ``<kind>-<first 12 hex digits of content_hash>``: two checkpoints with the
same weights, vocabulary and analysis share an id whatever their metadata. Loading
recomputes the hash, so a truncated or altered file is refused. A loaded checkpoint also
knows the sha256 of the file's bytes (``file_sha256``, in an index's manifest since session
46): the same bytes again are the same model, told without torch (``search --model``).

**Another corpus's vocabulary** (:func:`load_for_indexing`, :func:`adapt_to_vocabulary`):
an index assigns its own term ids. Every tensor with one row per training term is remapped
to the corpus vocabulary (:func:`ckqti.embeddings.adapt_embeddings`): embedding rows of
terms the training vocabulary knows are copied; a term it never saw gets a row predicted
from its all-MiniLM-L6-v2 WordPiece composition by a ridge map fitted on the known terms,
at the known rows' median norm (``fallback = "minilm"``, the default; any alphanumeric word has a composition, so a new
spelling of a known word lands near it), or the mean known row (``fallback = "mean"``).
NDRM2's idf is recomputed from the corpus (``set_collection``). BatchScale means, BatchNorm
statistics and every other weight stay as trained.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ckqti.errors import CkqtiError, InputError
from ckqti.files import check_folder_of, check_not_input, save_torch
from ckqti.models.inputs import WORDPIECE_ANALYZER
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary, checked

FORMAT = "ckqti-checkpoint"
FORMAT_VERSION = 1
QTI_KINDS = ("ndrm1", "ndrm2", "ndrm3")  # query-term independent: can fill an index
EMBEDDING_SUFFIX = "embedding.weight"  # one row per term: remapped, fallback rows for unseen terms
STATISTIC_SUFFIX = "idf"  # one value per term: recomputed from the corpus by set_collection
REQUIRED_KEYS = frozenset({"kind", "config", "state_dict", "vocab", "analyzer", "fallback", "meta", "content_hash"})
EMBEDDING_DTYPES = {"float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class Checkpoint:
    """A loaded (or about to be saved) checkpoint; see the module docstring for the fields."""

    kind: str
    config: dict
    state_dict: dict[str, Tensor]
    vocab: Vocabulary
    analyzer: dict
    meta: dict = field(default_factory=dict)
    content_hash: str = ""
    path: Path | None = None
    fallback: str = "minilm"
    file_sha256: str | None = None  # of the file's bytes, where loaded from one

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.content_hash[:12]}"

    def __repr__(self) -> str:  # not the dataclass's: that prints every weight and the whole vocabulary
        size = sum(t.numel() for t in self.state_dict.values())
        return f"Checkpoint(id={self.id!r}, parameters={size:,}, vocabulary={len(self.vocab):,}, path={self.path})"

    def build(self, device: torch.device | str | None = None) -> nn.Module:
        """The model exactly as saved (training vocabulary), in eval mode."""
        return _built(self, self.config, _as_float32(self.state_dict)).to(device or "cpu").eval()

    def info(self) -> dict[str, Any]:
        """What an index manifest records about the model."""
        return {
            "id": self.id,
            "name": self.path.stem if self.path else self.kind,
            "variant": self.kind,
            "path": str(self.path) if self.path else None,
            "content_hash": self.content_hash,
            "analyzer": dict(self.analyzer),
            **({"latent_gate": self.config["latent_gate"]} if self.config.get("latent_gate") is not None else {}),
            **({"file_sha256": self.file_sha256} if self.file_sha256 else {}),
        }


def _build_ndrm(config: Mapping[str, Any]) -> nn.Module:
    from ckqti.models.ndrm import build_ndrm
    from ckqti.models.ndrm_config import NDRMConfig

    return build_ndrm(NDRMConfig.from_dict(dict(config)))


def config_from_dict(cls: type, d: Mapping[str, Any]) -> Any:
    """A frozen dataclass config from its ``asdict`` form: lists back to tuples, nested configs rebuilt."""
    known = {f.name: f for f in fields(cls)}
    unknown = set(d) - set(known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    kwargs = {}
    for name, value in d.items():
        default = known[name].default
        if known[name].default_factory is not MISSING:
            default = known[name].default_factory()
        if is_dataclass(default) and isinstance(value, Mapping):
            value = config_from_dict(type(default), value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def _dataclass_builder(module: str, config_name: str, model_name: str) -> Callable[[Mapping[str, Any]], nn.Module]:
    def build(config: Mapping[str, Any]) -> nn.Module:
        mod = importlib.import_module(module)
        return getattr(mod, model_name)(config_from_dict(getattr(mod, config_name), config))

    return build


#: kind -> builder of an untrained model from its config dict (weights come from the state dict).
_BUILDERS: dict[str, Callable[[Mapping[str, Any]], nn.Module]] = {
    **{kind: _build_ndrm for kind in QTI_KINDS},
    "tk": _dataclass_builder("ckqti.models.tk", "TKConfig", "TK"),
    "tkl": _dataclass_builder("ckqti.models.tkl", "TKLConfig", "TKL"),
    "idcm": _dataclass_builder("ckqti.models.idcm", "IDCMConfig", "IDCM"),
}


def _builder(kind: str, path: Path | None) -> Callable[[Mapping[str, Any]], nn.Module]:
    if kind not in _BUILDERS:
        raise CkqtiError(f"checkpoint holds a {kind!r} model, which this version cannot build", path)
    return _BUILDERS[kind]


def _built(ckpt: Checkpoint, config: Mapping[str, Any], state: Mapping[str, Tensor]) -> nn.Module:
    """The model of ``ckpt``'s kind from ``config`` with ``state`` loaded; a config or weights this
    version cannot read (a newer ckqti's field, weights of another shape) is a one-line error."""
    builder = _builder(ckpt.kind, ckpt.path)
    try:
        model = builder(config)
    except (TypeError, ValueError) as err:
        raise CkqtiError(f"its {ckpt.kind} config is not one this version of ckqti reads ({err})", ckpt.path) from None
    try:
        model.load_state_dict(state)
    except RuntimeError as err:  # torch: "Error(s) in loading state_dict ...:" then one line a problem
        why = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise CkqtiError(f"its weights do not fit its {ckpt.kind} config ({why[:200]})", ckpt.path) from None
    return model


def _as_float32(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    return {k: v.float() if v.dtype == torch.float16 else v for k, v in state.items()}


def content_hash(
    kind: str, config: Mapping, analyzer: Mapping, vocab: Vocabulary, state: Mapping[str, Tensor], fallback: str
) -> str:
    """sha256 over everything that defines the model's scores (not its metadata)."""
    h = hashlib.sha256()
    header = {"kind": kind, "config": dict(config), "analyzer": dict(analyzer), "fallback": fallback,
              "num_docs": vocab.num_docs, "total_terms": vocab.total_terms}
    h.update(json.dumps(header, sort_keys=True).encode())
    h.update("\n".join(vocab.terms).encode())
    n = len(vocab)
    h.update(np.ascontiguousarray(vocab.df[:n], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(vocab.cf[:n], dtype=np.int64).tobytes())
    for key in sorted(state):
        t = state[key].detach().cpu().contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def stored_state(model: nn.Module, embedding_dtype: str = "float32") -> dict[str, Tensor]:
    """The model's state as saved: CPU tensors, embedding matrices in ``embedding_dtype``."""
    if embedding_dtype not in EMBEDDING_DTYPES:
        raise ValueError(f"embedding_dtype must be one of {sorted(EMBEDDING_DTYPES)}, got {embedding_dtype!r}")
    out = {}
    for key, value in model.state_dict().items():
        t = value.detach().cpu().clone()
        if key.endswith(EMBEDDING_SUFFIX) and t.is_floating_point():
            t = t.to(EMBEDDING_DTYPES[embedding_dtype])
        out[key] = t
    return out


def round_embeddings(model: nn.Module, embedding_dtype: str) -> None:
    """Round the model's embedding matrices to ``embedding_dtype`` in place, so it scores as its saved copy will."""
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key.endswith(EMBEDDING_SUFFIX) and value.is_floating_point():
                value.copy_(value.to(EMBEDDING_DTYPES[embedding_dtype]).to(value.dtype))


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    kind: str,
    config: Mapping[str, Any],
    vocab: Vocabulary,
    analyzer: Analyzer | Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    embedding_dtype: str = "float32",
    fallback: str = "minilm",
) -> Checkpoint:
    """Write ``model`` as a checkpoint at ``path`` (atomically: temporary file, then rename).

    ``meta`` must hold JSON-like values only (it is stored as is). ``embedding_dtype``
    ``"float16"`` halves the embedding matrices on disk (call :func:`round_embeddings` first
    to evaluate exactly what is saved). ``fallback`` is how :func:`adapt_to_vocabulary` fills
    rows of unseen words. Returns the checkpoint, whose ``id`` identifies the model.
    """
    from ckqti.embeddings import FALLBACKS

    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    analyzer_dict = analyzer.to_dict() if isinstance(analyzer, Analyzer) else dict(analyzer)
    state = stored_state(model, embedding_dtype)
    vocab = vocab.trimmed()
    digest = content_hash(kind, config, analyzer_dict, vocab, state, fallback)
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "config": dict(config),
        "state_dict": state,
        "vocab": {
            "terms": list(vocab.terms),
            "df": torch.from_numpy(vocab.df.astype(np.int64)),
            "cf": torch.from_numpy(vocab.cf.astype(np.int64)),
            "num_docs": int(vocab.num_docs),
            "total_terms": int(vocab.total_terms),
        },
        "analyzer": analyzer_dict,
        "fallback": fallback,
        "meta": json.loads(json.dumps(dict(meta or {}))),
        "content_hash": digest,
    }
    target = Path(path)
    save_torch(payload, target)
    return Checkpoint(kind, dict(config), state, vocab, analyzer_dict, payload["meta"], digest, target.resolve(), fallback)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read and verify a checkpoint written by :func:`save_checkpoint`.

    Raises:
        CkqtiError: missing file, not a checkpoint, another format version, a vocabulary
            :func:`ckqti.vocab.checked` refuses, or a content hash that does not match (a corrupted file).
    """
    p = Path(path)
    if not p.is_file():
        raise CkqtiError("checkpoint not found", p)
    try:
        data = p.read_bytes()  # hashed as read: the bytes torch loads are the ones the manifest records
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a damaged or foreign file
        raise CkqtiError(f"not a readable ckqti checkpoint: {unreadable_reason(p, err)}", p) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CkqtiError("not a ckqti checkpoint", p)
    if payload.get("format_version") != FORMAT_VERSION:
        raise CkqtiError(f"checkpoint format version {payload.get('format_version')} is not supported", p)
    missing = sorted(REQUIRED_KEYS - set(payload))
    if missing:
        raise CkqtiError(f"checkpoint lacks {', '.join(missing)}", p)
    v = payload["vocab"]
    wordpiece = payload["analyzer"].get("tokenizer") == WORDPIECE_ANALYZER["tokenizer"]  # IDCM's tokens: [UNK] is 100
    vocab = checked(Vocabulary(list(v["terms"]), v["df"].numpy().copy(), v["cf"].numpy().copy(), v["num_docs"],
                               v["total_terms"]), p, reserved=not wordpiece)
    ckpt = Checkpoint(payload["kind"], payload["config"], payload["state_dict"], vocab, payload["analyzer"],
                      payload["meta"], payload["content_hash"], p.resolve(), payload["fallback"],
                      hashlib.sha256(data).hexdigest())
    if content_hash(ckpt.kind, ckpt.config, ckpt.analyzer, vocab, ckpt.state_dict, ckpt.fallback) != ckpt.content_hash:
        raise CkqtiError("checkpoint content does not match its hash (corrupted file?)", p)
    return ckpt


TORCH_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive


def check_checkpoint_path(out: str | Path, inputs: dict[str, str | Path | None] | None = None) -> None:
    """Before any training: ``out`` may be new or an earlier checkpoint (replaced), never a folder, a
    path below a file, another kind of file or one of the training's ``inputs`` (what each is -> its
    path: the checkpoint whose word vectors start the model)."""
    out = Path(out)
    if out.is_dir():
        raise InputError("is a directory; a checkpoint is written to a file", out)
    check_folder_of(out, "the checkpoint")
    if out.exists():
        try:
            load_checkpoint(out)
        except CkqtiError:
            raise InputError("exists and is not a ckqti checkpoint; training replaces only a checkpoint: remove it or "
                             "write the checkpoint elsewhere", out) from None
    check_not_input(out, inputs or {})


def unreadable_reason(path: Path, err: Exception) -> str:
    """Why torch could not load ``path``: not a file torch.save wrote (its first bytes), or one cut
    short or damaged (torch's own first line, which a bare exception name like "KeyError" hid)."""
    with open(path, "rb") as f:
        head = f.read(len(TORCH_MAGIC))
    if head != TORCH_MAGIC:
        return "not a file torch.save wrote"
    first = (str(err).splitlines() or [type(err).__name__])[0].split(". ")[0]  # torch's first sentence
    return f"torch cannot read it ({first[:160]}): cut short or damaged?"


def remap_rows(matrix: Tensor, source: Vocabulary, target: Vocabulary, fallback: str = "minilm") -> Tensor:
    """Rows of a per-term matrix for ``target``'s ids (:func:`ckqti.embeddings.adapt_embeddings`).

    Rows of terms ``source`` knows are copied; unseen terms get ``fallback`` rows
    (``"minilm"``: predicted from their WordPiece composition; ``"mean"``: the known rows' mean).

    Shape:
        matrix ``[len(source), D]`` -> ``[len(target), D]``.
    """
    from ckqti.embeddings import adapt_embeddings

    return torch.from_numpy(adapt_embeddings(matrix.float().numpy(), source, target, fallback))


def checkpoint_embeddings(path: str | Path, vocab: Vocabulary, dim: int) -> np.ndarray:
    """``[len(vocab), dim]``: a checkpoint's word vectors as another model's start.

    The first embedding matrix of the checkpoint (NDRM's ``latent.embedding.weight``, TK's
    ``embedding.weight``), its rows remapped to ``vocab`` (:func:`remap_rows`: unseen words get
    its fallback rows).

    Raises:
        CkqtiError: unreadable checkpoint, no embedding matrix, or rows of another width.
    """
    ckpt = load_checkpoint(path)
    keys = [k for k, v in ckpt.state_dict.items() if k.endswith(EMBEDDING_SUFFIX) and v.shape[:1] == (len(ckpt.vocab),)]
    if not keys:
        raise CkqtiError("the checkpoint has no word embedding matrix", ckpt.path)
    matrix = ckpt.state_dict[keys[0]]
    if matrix.shape[1] != dim:
        raise CkqtiError(f"its word vectors have {matrix.shape[1]} dimensions, the model {dim}", ckpt.path)
    return remap_rows(matrix, ckpt.vocab, vocab, ckpt.fallback).numpy()


def adapt_to_vocabulary(ckpt: Checkpoint, vocab: Vocabulary, device: torch.device | str | None = None) -> nn.Module:
    """The checkpoint's model with term ids of ``vocab`` and its statistics attached, in eval mode."""
    config = replace_vocab_size(ckpt.config, len(vocab))
    n_train = len(ckpt.vocab)
    state = {}
    for key, value in _as_float32(ckpt.state_dict).items():
        if key.endswith(EMBEDDING_SUFFIX) and value.shape[:1] == (n_train,):
            value = remap_rows(value, ckpt.vocab, vocab, ckpt.fallback)
        elif key.endswith(STATISTIC_SUFFIX) and value.shape[:1] == (n_train,):
            value = torch.zeros((len(vocab),) + tuple(value.shape[1:]), dtype=value.dtype)
        state[key] = value
    model = _built(ckpt, config, state)
    if hasattr(model, "set_collection"):
        model.set_collection(vocab)
    return model.to(device or "cpu").eval()


def replace_vocab_size(config: Mapping[str, Any], size: int) -> dict[str, Any]:
    if "vocab_size" not in config:
        raise ValueError("model config has no vocab_size")
    return {**config, "vocab_size": int(size)}


def load_for_indexing(path: str | Path, device: torch.device | str | None = None, check_impacts: bool = False):
    """``(factory, info)`` for :func:`ckqti.models.loading.load_qti_model`.

    ``factory(corpus_vocab)`` returns the checkpoint's model, in eval mode on ``device``, whose
    term ids are ``corpus_vocab``'s (see :func:`adapt_to_vocabulary`); ``info`` holds ``id``,
    ``name``, ``variant``, ``path``, ``content_hash`` and ``analyzer`` (the index must analyze
    text the same way).

    With ``check_impacts`` (an index is about to be built), a model whose scores cannot be stored
    as impacts is refused here, before any work, rather than when its first batch is scored.

    Raises:
        CkqtiError: unreadable checkpoint, a model that is not query-term independent, or (with
            ``check_impacts``) an NDRM3 weighing exact-match evidence negatively.
    """
    ckpt = load_checkpoint(path)
    if ckpt.kind not in QTI_KINDS:
        raise CkqtiError(f"a {ckpt.kind!r} model is not query-term independent: it cannot fill an index", ckpt.path)
    if check_impacts and ckpt.kind == "ndrm3":
        b = ckpt.build("cpu").combination()[1]
        if b < 0:
            raise CkqtiError(f"this NDRM3 weighs exact-match evidence negatively (b = {b:.4g}): its idf channel cannot "
                             "be stored as impacts (train it longer, or use it to rerank)", ckpt.path)

    def factory(vocab: Vocabulary) -> nn.Module:
        return adapt_to_vocabulary(ckpt, vocab, device)

    return factory, ckpt.info()


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "QTI_KINDS",
    "Checkpoint",
    "adapt_to_vocabulary",
    "content_hash",
    "load_checkpoint",
    "load_for_indexing",
    "remap_rows",
    "round_embeddings",
    "save_checkpoint",
    "stored_state",
]
