"""Choosing and loading the QTI model that fills an index.

A model spec is ``"ndrm2"`` (the untrained explicit model: BM25-like, two parameters,
usable without training), a checkpoint path written by ``ckqti train``, or None for
the default: the bundled NDRM3 checkpoint when the package ships one, else NDRM2.
The loader returns a factory ``vocab -> model`` because models are set up for the
corpus being indexed (NDRM2's idf, embedding rows of new words).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ckqti.errors import CkqtiError
from ckqti.vocab import Vocabulary

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "data" / "models" / "ndrm3-scifact.pt"


def pick_device(device: str | None = None) -> torch.device:
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def untrained_ndrm2(device: torch.device) -> tuple[Callable[[Vocabulary], torch.nn.Module], dict]:
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    def factory(vocab: Vocabulary) -> torch.nn.Module:
        model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab, device=device)
        return model.eval()

    return factory, {"id": "ndrm2-untrained", "name": "ndrm2", "variant": "ndrm2"}


def load_qti_model(spec: str | None = None, device: str | None = None):
    """Returns ``(factory, info)``: ``factory(vocab)`` gives a ready model; ``info`` goes in the manifest."""
    dev = pick_device(device)
    if spec is None:
        spec = str(DEFAULT_CHECKPOINT) if DEFAULT_CHECKPOINT.is_file() else "ndrm2"
    if spec == "ndrm2":
        return untrained_ndrm2(dev)
    path = Path(spec)
    if not path.is_file():
        raise CkqtiError("model not found (use 'ndrm2' or a checkpoint written by 'ckqti train')", path)
    from ckqti.train.checkpoint import load_for_indexing

    return load_for_indexing(path, dev)
