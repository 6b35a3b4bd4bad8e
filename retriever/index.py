"""Opening an index: manifest, checksums, memory-mapped shards as flat numpy arrays, and the
collection statistics (df, document count) from which search computes idf."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from ckqti.errors import IndexClosedError, IndexFormatError
from ckqti.text import Analyzer
from indexer.format import (
    DOCS_FILE,
    MANIFEST,
    MAX_DOC_KEY,
    POSTINGS_FILE,
    SEGMENTS_FILE,
    TERMS_FILE,
    Manifest,
    read_consistently,
    verify_files,
)
from indexer.quantize import Quantizer


def open_index(index: str | Path | Index) -> Index:
    """``index`` itself when it is open, else the directory opened with its checksums verified
    (commands that read one index several ways open it once)."""
    return index if isinstance(index, Index) else Index(index)


def read_mapped(path: Path) -> pa.Table:
    """Memory-map a single-batch Arrow IPC file (no copy)."""
    try:
        return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (pa.ArrowException, OSError) as e:  # any of Arrow's refusals of a damaged file
        raise IndexFormatError(f"cannot read Arrow file ({e})", path) from None


def column(table: pa.Table, name: str) -> np.ndarray:
    """A column as a numpy array, a view of the (memory-mapped) file's buffer where it is one chunk."""
    col = table.column(name)
    if col.num_chunks == 0:  # an empty column (a shard of documents without index terms) may hold no chunk
        col = pa.array([], type=col.type)
    elif col.num_chunks != 1:
        col = pa.concat_arrays(col.chunks)
    else:
        col = col.chunk(0)
    if (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)) and col.null_count == 0:
        # the data buffer viewed directly: Array.to_numpy imports pandas on the way (0.16 s of a
        # `ckqti search` that takes 1 s)
        dtype = np.dtype(col.type.to_pandas_dtype())
        if len(col) == 0:
            return np.zeros(0, dtype)
        return np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * dtype.itemsize)
    return col.to_numpy(zero_copy_only=True)


TAKE_FROM = 32  # Shard.docids: from how many documents one Arrow call beats a lookup each


@dataclass
class Shard:
    """One shard's arrays, views over memory-mapped files.

    Attributes:
        postings: uint32[N] documents, impact-ordered per term.
        seg_start: int64[S+1] postings offset of each segment.
        seg_impact: uint8[S+1] impact of each segment.
        seg_ptr: int64[L+1] first segment of each posting list id (``L``: the lists that existed
            when the shard was written; later ids are empty here).
        docs: the document store (docid, title, text, length).
        skips, skip_ptr: every 64th document of each segment (:func:`retriever.kernel_postings.build_skips`),
            derived in memory on first use (about 3% of the postings' bytes), as the kernels' search
            asks for them: a search by :mod:`retriever.scan` never loads Numba.
        post_impact: each posting's impact when segments are short (a learned index;
            :func:`retriever.kernel_postings.posting_impacts`, a quarter of the postings' bytes), else empty;
            derived on first use, as ``skips``.
    """

    name: str
    postings: np.ndarray
    seg_start: np.ndarray
    seg_impact: np.ndarray
    seg_ptr: np.ndarray
    docs: pa.Table

    @cached_property
    def _skip_table(self) -> tuple[np.ndarray, np.ndarray]:
        from retriever.kernel_postings import build_skips

        return build_skips(self.postings, self.seg_start)

    @cached_property  # not a property: each call's lookup cost a one-query search 0.1 us
    def skips(self) -> np.ndarray:
        return self._skip_table[0]

    @cached_property
    def skip_ptr(self) -> np.ndarray:
        return self._skip_table[1]

    @cached_property
    def post_impact(self) -> np.ndarray:
        from retriever.kernel_postings import posting_impacts

        return posting_impacts(self.postings, self.seg_start, self.seg_impact)

    @property
    def num_docs(self) -> int:
        return self.docs.num_rows

    @property
    def num_lists(self) -> int:
        return self.seg_ptr.shape[0] - 1

    def docid(self, i: int) -> str:
        return self._docid_array[i].as_py()

    def docids(self, rows: np.ndarray) -> list[str]:
        """The docids of documents ``rows`` (int64): beyond :data:`TAKE_FROM` of them in one Arrow
        call (60 us for 1,000, where :meth:`docid` takes 2 us each), else one by one (no import of
        ``pyarrow.compute``, 45 ms, for a search of ten)."""
        return take_rows(self._docid_array, rows)

    def docid_column(self, rows: np.ndarray) -> pa.Array:
        """The docids of documents ``rows`` (int64) as an Arrow string array, in one Arrow call."""
        return take_array(self._docid_array, rows)

    def titles(self, rows: np.ndarray) -> list[str]:
        """The titles of documents ``rows`` (int64), taken as :meth:`docids` takes docids (a search's
        1,000 hits: about 1 ms, where :meth:`document`, which reads each whole document, took 26)."""
        return take_rows(self._title_array, rows)

    def sorted_docids(self) -> SortedDocids:
        """The docids sorted, for lookups by docid (:class:`SortedDocids`; made anew at each call)."""
        return SortedDocids(self._docid_array)

    @cached_property
    def _docid_array(self) -> pa.Array:
        """The docid column as one array: a take from a chunked column costs 100 us before its first
        row, from an array 10 (a memory-mapped shard's column is one chunk: no copy)."""
        return one_array(self.docs.column("docid"))

    @cached_property
    def _title_array(self) -> pa.Array:
        return one_array(self.docs.column("title"))

    def document(self, i: int) -> dict:
        """``docid``, ``title``, ``text`` and ``prefix`` (the fields indexed before the title: ORCAS
        clicks, a URL; empty in an index written before it was stored) of document ``i``."""
        doc = {c: self.docs.column(c)[i].as_py() for c in ("docid", "title", "text")}
        doc["prefix"] = self.docs.column("prefix")[i].as_py() if "prefix" in self.docs.column_names else ""
        return doc

    def indexed_text(self, i: int) -> str:
        """Every field of document ``i`` the index read, in its order (prefix, title, text)."""
        doc = self.document(i)
        return "\n".join(f for f in (doc["prefix"], doc["title"], doc["text"]) if f)


def open_shard(directory: Path, name: str, verified: bool = False) -> Shard:
    """Map shard ``name``'s files and check the bounds the kernels rely on (:func:`check_offsets`);
    ``verified``: its files' checksums were checked, so the largest document its postings file
    records is the largest it holds, and they are not scanned for it."""
    d = directory / name
    seg = read_mapped(d / SEGMENTS_FILE)
    postings_table = read_mapped(d / POSTINGS_FILE)
    postings = file_column(postings_table, "doc", d / POSTINGS_FILE)
    seg_start = file_column(seg, "start", d / SEGMENTS_FILE)
    seg_impact = file_column(seg, "impact", d / SEGMENTS_FILE)
    seg_ptr = file_column(read_mapped(d / TERMS_FILE), "seg_ptr", d / TERMS_FILE)
    docs = read_mapped(d / DOCS_FILE)
    recorded = recorded_max_doc(postings_table) if verified else None
    check_offsets(d, postings, seg_start, seg_impact, seg_ptr, docs.num_rows, recorded)
    return Shard(name=name, postings=postings, seg_start=seg_start, seg_impact=seg_impact, seg_ptr=seg_ptr, docs=docs)


def file_column(table: pa.Table, name: str, path: Path) -> np.ndarray:
    """:func:`column` of an index file ``path``; a damaged file read without checksums (``verify=False``) is an
    error naming it and the column: the column missing (it was a ``KeyError`` traceback), or not numbers
    without nulls (it named neither the file nor the column, in Arrow's words)."""
    if name not in table.column_names:
        raise IndexFormatError(f"damaged: no column {name!r}", path)
    try:
        return column(table, name)
    except ValueError:  # Arrow's ArrowInvalid: nulls, or a type that is not numbers
        raise IndexFormatError(f"damaged: column {name!r} is not numbers without nulls "
                               f"({table.schema.field(name).type})", path) from None


def recorded_max_doc(postings: pa.Table) -> int | None:
    """The largest document number a postings file's writer recorded (``max_doc`` in its schema's
    metadata), or None: a file written before it was recorded, or an empty one."""
    value = (postings.schema.metadata or {}).get(MAX_DOC_KEY.encode())
    try:
        top = int(value) if value is not None else -1
    except ValueError:  # not a number: scan instead
        return None
    return top if top >= 0 else None


def check_offsets(d: Path, postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray,
                  num_docs: int, max_doc: int | None = None) -> None:
    """The bounds the Numba kernels rely on (they do not check them; a damaged file read without
    checksums, ``verify=False``, crashed the process): offsets that ascend within their arrays and
    document numbers within the shard's documents. ``max_doc``, the largest document number the
    postings file records, stands for a scan of every posting (a pass over all the postings' pages
    at each open); give it only for a file whose checksum was verified.

    Raises:
        IndexFormatError: naming the file whose offsets do not add up.
    """
    if (len(seg_start) == 0 or seg_start[0] != 0 or seg_start[-1] != len(postings) or len(seg_impact) < len(seg_start) - 1
            or np.any(np.diff(seg_start) < 0)):
        raise IndexFormatError("damaged: segment offsets do not cover the postings in order", d / SEGMENTS_FILE)
    if len(seg_ptr) == 0 or seg_ptr[0] != 0 or seg_ptr[-1] != len(seg_start) - 1 or np.any(np.diff(seg_ptr) < 0):
        raise IndexFormatError("damaged: list offsets do not cover the segments in order", d / TERMS_FILE)
    if not len(postings):
        return
    top = int(postings.max()) if max_doc is None else max_doc
    if top >= num_docs:
        raise IndexFormatError(f"damaged: a posting names document {top} of {num_docs}", d / POSTINGS_FILE)


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A column as one array: its only chunk (no copy), else its chunks combined."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def take_rows(array: pa.Array, rows: np.ndarray) -> list:
    """``array``'s values at ``rows`` (int64, within it): beyond :data:`TAKE_FROM` of them in one Arrow call."""
    if len(rows) <= TAKE_FROM:
        return [array[i].as_py() for i in rows.tolist()]
    return take_array(array, rows).to_pylist()


def take_array(array: pa.Array, rows: np.ndarray) -> pa.Array:
    """``array``'s values at ``rows`` (int64, within it) as an Arrow array, in one Arrow call."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    # the indices handed over as a buffer: taking a numpy array converts it by way of pandas,
    # whose import costs a search process 0.2 s
    return array.take(pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)]))


class SortedDocids:
    """A shard's docids in sorted order, read through a permutation (8 bytes a document; a dict of
    1M docids held 200 MB): :meth:`row` finds a docid by bisection, ~20 reads of one docid each.
    Arrow sorts UTF-8 by its bytes, which is the code point order Python compares strings by."""

    def __init__(self, docids: pa.Array):
        import pyarrow.compute as pc  # 45 ms to import: only where docids are looked up

        order = pc.sort_indices(docids)
        self.docids = docids
        self.order = np.frombuffer(order.buffers()[1], np.uint64, len(order), order.offset * 8)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> str:
        return self.docids[int(self.order[i])].as_py()

    def row(self, docid: str) -> int | None:
        """The row of ``docid`` in the shard, or ``None``."""
        i = bisect.bisect_left(self, docid)
        return int(self.order[i]) if i < len(self) and self[i] == docid else None


def collection_idf(df: np.ndarray, num_docs: int) -> np.ndarray:
    """Idf per term id by :meth:`ckqti.vocab.Vocabulary.idf`'s formula (0 for the reserved ids 0, 1):
    ``max(log((N - df + 0.5) / (df + 0.5)), 0)`` over the index's current statistics."""
    df = np.asarray(df, dtype=np.float64)
    out = np.maximum(np.log((float(num_docs) - df + 0.5) / (df + 0.5)), 0.0)
    out[:2] = 0.0
    return out


class Index:
    """A ckqti index opened for search; :meth:`close` (or a ``with`` block) releases its
    memory-mapped files, else they stay mapped until the object is garbage-collected.

    Args:
        path: index directory.
        verify: check every file's sha256 against the manifest (on by default; files unchanged since
            a check that passed, by their stat, are not hashed again: :mod:`indexer.stamps`); then a shard's
            postings are bounded by the largest document their file records, else (and in an index
            written before it was recorded) by a scan of every posting.
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        self.where = self.path.absolute()  # as opened: a later os.chdir moves what a relative path names
        self.closed = False
        read_consistently(self.path, lambda: self._open(verify))  # the index a writer leaves, not a mixture

    def _open(self, verify: bool) -> None:
        self.manifest = Manifest.read(self.path)
        if verify:
            verify_files(self.path, self.manifest)
        where = self.path / self.manifest.vocab_file
        vocab = read_mapped(where)
        self.terms: list[str] = vocab.column("term").to_pylist()
        self.term_ids = {t: i for i, t in enumerate(self.terms)}
        self._df = file_column(vocab, "df", where)
        self._cf = file_column(vocab, "cf", where)
        self._offsets = file_column(vocab, "offset", where)
        try:
            self.analyzer = Analyzer.from_dict(self.manifest.analyzer)
        except (ValueError, TypeError, AttributeError) as e:
            raise IndexFormatError(f"manifest's analyzer is not one this ckqti has ({e})", self.path / MANIFEST) from None
        self.quantizer = Quantizer.from_manifest(self.manifest.quantization, self.manifest.channels)
        self.idf = collection_idf(self.df, self.manifest.collection.get("num_docs", self.manifest.num_docs))
        self._shards = [open_shard(self.path, s.name, verify) for s in self.manifest.shards]
        bad = [s.name for s, info in zip(self.shards, self.manifest.shards) if s.num_docs != info.num_docs]
        if bad:
            raise IndexFormatError(f"shard {bad[0]} does not match the manifest", self.path / MANIFEST)

    def close(self) -> None:
        """Release the memory-mapped files (a second call does nothing): once arrays taken from
        the index before (a shard's ``postings``) are freed too, its files are unmapped, and may be
        replaced or deleted on any platform. Reading the shards or the vocabulary's columns
        afterwards, a search included, raises :class:`ckqti.errors.IndexClosedError`."""
        self.closed = True
        empty = np.zeros(0, np.int64)
        self._shards, self._df, self._cf, self._offsets = [], empty, empty, empty

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mapped(self, value):
        """``value`` (read from the mapped files) while the index is open: a closed one raises
        rather than look like an empty index."""
        if self.closed:
            raise IndexClosedError("the index is closed; open it again to search it", self.path)
        return value

    @property
    def shards(self) -> list[Shard]:
        return self._mapped(self._shards)

    @property
    def df(self) -> np.ndarray:
        """Document frequency per term id (a view of the vocabulary file)."""
        return self._mapped(self._df)

    @property
    def cf(self) -> np.ndarray:
        return self._mapped(self._cf)

    @property
    def offsets(self) -> np.ndarray:
        """Per term id, the constant added to every document's score for it, kept out of its postings
        (a view of the vocabulary file)."""
        return self._mapped(self._offsets)

    def vocabulary(self):
        """The collection's :class:`ckqti.vocab.Vocabulary` as the index holds it (terms, df, cf,
        documents, total length): a checkpoint adapted to it reads text with the index's term ids
        and statistics, as the build did (explanations of the index's scores)."""
        from ckqti.vocab import Vocabulary

        stats = self.manifest.collection
        return Vocabulary(list(self.terms), np.array(self.df, np.int64), np.array(self.cf, np.int64),
                          int(stats.get("num_docs", self.manifest.num_docs)), int(stats.get("total_terms", 0)))

    @property
    def num_docs(self) -> int:
        return self.manifest.num_docs

    @property
    def model_id(self) -> str:
        return self.manifest.model.get("id", "")

    def docids(self, shards: np.ndarray, rows: np.ndarray) -> list[str]:
        """The docids of documents ``(shards[i], rows[i])``, each shard's in one call (:meth:`Shard.docids`)."""
        return self._per_shard(Shard.docids, shards, rows)

    def docid_column(self, shards: np.ndarray, rows: np.ndarray) -> list[str] | pa.Array:
        """:meth:`docids` as a run writes them: beyond :data:`TAKE_FROM` documents an Arrow string array
        (a take from each shard's docids, no Python string made of each: a run at k = 1,000 made and
        dropped a million), else the list :meth:`docids` gives."""
        if len(rows) <= TAKE_FROM:
            return self.docids(shards, rows)
        if len(self.shards) == 1:
            return self.shards[0].docid_column(rows)
        parts = [self.shards[si].docid_column(rows[shards == si]) for si in np.unique(shards).tolist()]
        if len({p.type for p in parts}) > 1:
            parts = [p.cast(pa.large_string()) for p in parts]
        by_shard = np.argsort(shards, kind="stable")  # the order of the hits in the parts joined
        return take_array(pa.concat_arrays(parts), np.argsort(by_shard))

    def titles(self, shards: np.ndarray, rows: np.ndarray) -> list[str]:
        """The titles of documents ``(shards[i], rows[i])``, each shard's in one call (:meth:`Shard.titles`)."""
        return self._per_shard(Shard.titles, shards, rows)

    def _per_shard(self, take, shards: np.ndarray, rows: np.ndarray) -> list:
        if len(self.shards) == 1:
            return take(self.shards[0], rows)
        out = [""] * len(rows)
        for si in np.unique(shards).tolist():
            where = np.flatnonzero(shards == si)
            for i, value in zip(where.tolist(), take(self.shards[si], rows[where])):
                out[i] = value
        return out

    def locate(self, docid: str) -> tuple[int, int] | None:
        """``(shard number, row)`` of ``docid``, or ``None`` when no shard holds it (a pass over the
        shards' docids in Arrow, up to the one holding it: no Python string made of each; for many
        lookups, :meth:`Shard.sorted_docids`)."""
        import pyarrow.compute as pc  # 45 ms to import: only where docids are looked up

        for si, shard in enumerate(self.shards):
            row = pc.index(shard.docs.column("docid"), docid).as_py()
            if row >= 0:
                return si, row
        return None

    def check_compatible(self, analyzer: dict | None = None, model_id: str | None = None) -> None:
        """Refuse an index built with another analyzer or model than the one asked for."""
        where = self.path / MANIFEST
        if analyzer is not None and analyzer != self.manifest.analyzer:
            raise IndexFormatError(
                f"index was built with analyzer {self.manifest.analyzer}, not the requested {analyzer}", where
            )
        if model_id is not None and model_id != self.model_id:
            raise IndexFormatError(f"index was built with model {self.model_id!r}, not {model_id!r}", where)
