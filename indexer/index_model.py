"""Which model scores documents for an index: the one it was built with, as its manifest records it.

An append scores its new documents with it, and ``explain`` with an index explains its scores, when no
other model is named; ``search --model`` is told whether a model is the index's without loading it where
the manifest can say (:func:`known_model_id`).
"""

from __future__ import annotations

from pathlib import Path

from ckqti.errors import CkqtiError
from indexer.format import MANIFEST, Manifest, file_checksum


def model_for_index(index_path: str | Path | None, model: str | Path | None = None,
                    manifest: Manifest | None = None) -> str | Path:
    """``model`` when one is given (as given), else the model spec the index at ``index_path`` was built with
    (:func:`index_model_spec`), read from ``manifest`` where the caller holds it, else from the index's."""
    if model is not None:
        return model
    assert index_path is not None, "the index's model needs the index"
    return index_model_spec(Path(index_path), Manifest.read(index_path) if manifest is None else manifest)


def index_model_spec(index: Path, manifest: Manifest) -> str:
    """The model spec (for :func:`ckqti.models.loading.load_qti_model`) the index was built with:
    the recorded checkpoint path, or, where that is gone (the package reinstalled elsewhere, the
    index copied to another machine), this install's bundled checkpoint when it is the same model."""
    from ckqti.models.specs import DEFAULT_CHECKPOINT, UNTRAINED, untrained_id

    model = manifest.model
    if model.get("path"):
        path = Path(model["path"])
        if path.is_file():
            return str(path)
        if DEFAULT_CHECKPOINT.is_file() and model.get("content_hash") == bundled_content_hash():
            return str(DEFAULT_CHECKPOINT)
        raise CkqtiError(f"the index's model {path} is not there: give that checkpoint (model id {model.get('id')}) "
                         "with --model", index / MANIFEST)

    for spec in UNTRAINED:
        if model.get("id") == untrained_id(spec):
            return spec
    raise CkqtiError(f"index was built with model {model.get('id')!r}, which cannot score new documents", index / MANIFEST)


def bundled_content_hash() -> str:
    """The content hash of the bundled checkpoint (loaded whole: only where a recorded path is gone)."""
    from ckqti.models.checkpoint import load_checkpoint
    from ckqti.models.specs import DEFAULT_CHECKPOINT

    return load_checkpoint(DEFAULT_CHECKPOINT).content_hash


def known_model_id(spec: str, manifest: Manifest) -> str | None:
    """The model id of ``spec`` (resolved: an untrained model's name or a checkpoint's path,
    :func:`ckqti.models.specs.resolve_model`) where it is known without torch: an untrained model's, or the
    manifest's own when ``spec`` is a file with the bytes of the checkpoint the index was built with (its
    ``file_sha256``, recorded since session 46). None where only loading the checkpoint can tell."""
    from ckqti.models.specs import UNTRAINED, untrained_id

    if spec in UNTRAINED:
        return untrained_id(spec)
    recorded = manifest.model.get("file_sha256")
    return manifest.model.get("id") if recorded and file_checksum(spec) == recorded else None
