"""Choosing and loading the QTI model that fills an index.

A model spec is ``"ndrm2"`` (the untrained explicit model: BM25-like, two parameters,
usable without training, at the paper's start: BM25 with ``k1 = 1, b = 1``),
``"ndrm2-anserini"`` (the same started at Anserini's BM25 defaults, ``k1 = 0.9, b = 0.4``;
:data:`UNTRAINED`), ``"ndrm3-scifact"`` (the bundled checkpoint, :data:`BUNDLED`), a
checkpoint path written by ``ckqti train``, or None for the default: the bundled NDRM3 checkpoint when the package ships one, else NDRM2.
The loader returns a factory ``vocab -> model`` because models are set up for the
corpus being indexed (NDRM2's idf, embedding rows of new words).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ckqti.errors import CkqtiError
from ckqti.models.ndrm import ANSERINI_BM25, NDRMConfig, build_ndrm
from ckqti.vocab import Vocabulary

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "data" / "models" / "ndrm3-scifact.pt"


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` as a torch device; None: CUDA when present, else the CPU.

    Raises:
        CkqtiError: a name torch does not know, or CUDA where there is none.
    """
    if not device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise CkqtiError(f"device {device!r} is not a torch device (e.g. cpu, cuda, cuda:1)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CkqtiError(f"device {device!r}: CUDA is not available here (use cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise CkqtiError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


UNTRAINED = {"ndrm2": None, "ndrm2-anserini": ANSERINI_BM25}  # spec -> NDRMConfig.bm25_init
BUNDLED = {"ndrm3-scifact": DEFAULT_CHECKPOINT}  # short name -> a checkpoint the package ships
MODEL_SPECS = "'ndrm2', 'ndrm2-anserini', 'ndrm3-scifact' (the bundled model) or a checkpoint written by 'ckqti train'"


def resolve_model(spec: str | Path) -> str:
    """``spec`` as the loaders read it: an untrained model's name as given, a bundled model's
    short name (:data:`BUNDLED`) as its checkpoint's path, else a path that must be a file.

    Raises:
        CkqtiError: a directory, neither a file nor a known name, or a bundled model this install lacks.
    """
    spec = str(spec)
    if spec in UNTRAINED:
        return spec
    if spec in BUNDLED:
        if not BUNDLED[spec].is_file():
            raise CkqtiError(f"the bundled model {spec!r} is not in this install", BUNDLED[spec])
        return str(BUNDLED[spec])
    if Path(spec).is_dir():  # an index, say: "not found" would send the user looking for a path that is there
        raise CkqtiError(f"is a directory; a model is {MODEL_SPECS}", spec)
    if not Path(spec).is_file():
        raise CkqtiError(f"model not found: neither a file nor one of {MODEL_SPECS}", spec)
    return spec


def untrained_id(spec: str) -> str:
    """The manifest's model id of the untrained model ``spec`` (a key of :data:`UNTRAINED`)."""
    return f"{spec}-untrained"


def untrained_ndrm2(device: torch.device, spec: str = "ndrm2") -> tuple[Callable[[Vocabulary], torch.nn.Module], dict]:
    """The untrained NDRM2 of ``spec`` (a key of :data:`UNTRAINED`) as ``(factory, info)``."""
    bm25_init = UNTRAINED[spec]

    def factory(vocab: Vocabulary) -> torch.nn.Module:
        model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2", bm25_init=bm25_init), vocab, device=device)
        return model.eval()

    return factory, {"id": untrained_id(spec), "name": spec, "variant": "ndrm2"}


def load_qti_model(spec: str | None = None, device: str | None = None):
    """Returns ``(factory, info)``: ``factory(vocab)`` gives a ready model; ``info`` goes in the manifest."""
    dev = pick_device(device)
    if spec is None:
        spec = str(DEFAULT_CHECKPOINT) if DEFAULT_CHECKPOINT.is_file() else "ndrm2"
    spec = resolve_model(spec)
    if spec in UNTRAINED:
        return untrained_ndrm2(dev, spec)
    from ckqti.models.checkpoint import load_for_indexing

    return load_for_indexing(Path(spec), dev, check_impacts=True)
