"""The names a model is given by, resolved without importing torch.

A model spec is ``"ndrm2"`` (the untrained explicit model: BM25-like, two parameters,
usable without training, at the paper's start: BM25 with ``k1 = 1, b = 1``),
``"ndrm2-anserini"`` (the same started at Anserini's BM25 defaults, ``k1 = 0.9, b = 0.4``;
:data:`UNTRAINED`), ``"ndrm3-scifact"`` (the bundled checkpoint, :data:`BUNDLED`) or a
checkpoint path written by ``ckqti train``. Commands resolve a spec here first, so that a
model that is not there is said before the seconds torch's import takes
(:mod:`ckqti.models.loading` loads it).
"""

from __future__ import annotations

from pathlib import Path

from ckqti.errors import CkqtiError

ANSERINI_BM25 = (0.9, 0.4)  # Anserini's (and Pyserini's) default BM25 k1, b
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "data" / "models" / "ndrm3-scifact.pt"
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
