"""Where a build reads and writes, checked before any work: light to import (no torch), so that
``ckqti index`` refuses an existing output or a missing corpus at once rather than after loading its
model (2.8 s, most of it importing torch)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import CkqtiError
from ckqti.files import check_folder_of
from indexer.format import MANIFEST, Manifest

if TYPE_CHECKING:
    from indexer.readers import Document


def corpus_file(corpus: str | os.PathLike | Sequence[Document]) -> Path | None:
    """A build's or an append's corpus as the :class:`Path` of its file, or None for documents given
    in memory (:func:`indexer.readers.read_documents`), which have no file to check or record."""
    return Path(corpus) if isinstance(corpus, (str, os.PathLike)) else None


def output_path(out: str | Path) -> Path:
    """Where a build installs: ``out``, or the directory a symbolic link ``out`` points to (a
    rebuild replaces the index behind the link and keeps the link). The root directory is refused
    (a :class:`CkqtiError`): a build writes beside the index, and the root has no folder above it."""
    out = Path(out)
    if not out.resolve().name:  # '/' (or a link to it): no OUT.partial, OUT.lock beside it
        raise CkqtiError("is the root directory; a build writes beside the index and renames it into place: "
                         "choose a folder below it", out)
    return out.resolve() if out.is_symlink() else out


def check_build_paths(corpus_path: Path | None, orcas: Path | None, out: Path, force: bool, fmt: str | None) -> None:
    """Refuse a build before any work: a missing corpus or ORCAS file (or one :func:`check_input_files`
    refuses, read as format ``fmt``), an ``out`` whose folder is
    not writable, an ``out`` inside another
    index (its appends and compactions own that folder), an existing ``out`` without ``force``,
    and with ``force`` anything but a ckqti index (or an empty directory) there, the working
    directory or one above it, or an ``out`` holding an input (``force`` replaces the whole
    directory)."""
    check_input_files(corpus_path, orcas, fmt)
    check_folder_of(out, "the index")
    folder = next(p for p in out.resolve().parents if p.exists())
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CkqtiError(f"cannot be written: its folder {folder} is not writable (a build writes beside "
                         "the index, then renames it into place)", out)
    outer = next((p for p in out.resolve().parents if (p / MANIFEST).is_file()), None)
    if outer is not None:
        raise CkqtiError(f"is inside the index {outer}, whose appends and compactions would delete it; "
                         "choose an output outside it", out)
    if not out.exists() and not out.is_symlink():
        return
    if not force:
        raise CkqtiError("output exists; pass --force (Python: force=True) to replace it", out)
    here = Path.cwd().resolve()
    target = out.resolve()
    if target == here or target in here.parents:
        raise CkqtiError("is the working directory or holds it; --force would delete it, choose another output", out)
    if not target.is_dir() or (any(target.iterdir()) and not (target / MANIFEST).is_file()):
        raise CkqtiError(f"exists and is not a ckqti index (no {MANIFEST}); --force replaces only an index", out)
    for f in (corpus_path, orcas):
        if f is not None and target in f.resolve().parents:
            raise CkqtiError("holds an input file, which --force would delete; choose another output", out)


def check_append_paths(corpus_path: Path | None, orcas: Path | None, index: Path, fmt: str | None) -> None:
    """Refuse an append before any work (its model loads in seconds): a corpus (None: documents in
    memory) or ORCAS file that is no regular file (or one :func:`check_input_files` refuses, read as format
    ``fmt``), no index at ``index``, or an index that cannot be written (:func:`read_only_index`)."""
    check_input_files(corpus_path, orcas, fmt)
    Manifest.read(index)
    if not os.access(index, os.W_OK | os.X_OK):
        raise read_only_index(index)


def read_only_index(index: Path) -> CkqtiError:
    """The error for an index in which an append or a compaction cannot write: named as the index
    (not as the lock file it would make first, which the user never named)."""
    return CkqtiError("cannot be written: the index is read-only (its folder or file system); an append or "
                      "a compaction writes its new shards inside it", index)


def check_input_files(corpus_path: Path | None, orcas: Path | None, fmt: str | None) -> None:
    """The corpus and the ORCAS file (None: none) of a build or an append must be regular files: a
    :class:`CkqtiError` saying what one is instead (a folder, a pipe, nothing); their first bytes
    must read as UTF-8 lines (:func:`indexer.readers.formats.check_start`), and the corpus's as
    format ``fmt`` (None: told from the file) with a document to read
    (:func:`indexer.readers.corpus.check_corpus_start`)."""
    from indexer.readers.corpus import check_corpus_start
    from indexer.readers.formats import check_start

    for path, kind in ((corpus_path, "corpus"), (orcas, "ORCAS")):
        if path is not None and not path.is_file():
            why = ("is a directory, not a file" if path.is_dir()
                   else "is not a regular file (a pipe is read once only; write it to a file first)" if path.exists()
                   else "not found")
            raise CkqtiError(f"{kind} file {why}", path)
    for path in (corpus_path, orcas):
        if path is not None:
            check_start(path)
    if corpus_path is not None:
        check_corpus_start(corpus_path, fmt)
