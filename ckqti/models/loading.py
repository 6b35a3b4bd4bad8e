"""Choosing and loading the QTI model that fills an index.

A model spec is one of :mod:`ckqti.models.specs`' (an untrained NDRM2, the bundled NDRM3, a
checkpoint written by ``ckqti train``), or None for the default: the bundled NDRM3 checkpoint
when the package ships one, else NDRM2.
The loader returns a factory ``vocab -> model`` because models are set up for the
corpus being indexed (NDRM2's idf, embedding rows of new words).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ckqti.errors import CkqtiError
from ckqti.models.ndrm import build_ndrm
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.specs import DEFAULT_CHECKPOINT, UNTRAINED, resolve_model, untrained_id
from ckqti.vocab import Vocabulary


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` as a torch device; None: CUDA when present, else the CPU.

    Raises:
        CkqtiError: a name torch does not know, CUDA where there is none, or another device (mps, meta, ...)
            on which this torch cannot make a tensor.
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
    elif dev.type != "cpu":  # mps, xpu, meta, ...: a traceback at the model's first use (after BM25, in train)
        try:
            torch.zeros(1, device=dev).item()  # meta holds no values: .item() refuses it
        except Exception as err:  # torch raises many types here
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0].split(". ")[0].rstrip(".")
            raise CkqtiError(f"device {device!r} cannot run a model here ({reason}); use cpu") from None
    return dev


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
