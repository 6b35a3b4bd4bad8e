"""The on-disk index format: file names, Arrow schemas, the manifest and its version.

An index is a directory::

    INDEX/
      manifest.json            format version, model, analyzer, channels (weighting and quantization
                               step of each), collection statistics, shards, checksums
      vocab.arrow              term (string), df, cf (int64), offset (float32), one row per term id
                               (after appends: vocab-NNNNN.arrow, the file the manifest names)
      shard-00000/
        postings.arrow         doc (uint32): shard-local document numbers, impact-ordered; the schema's
                               metadata ``max_doc`` (written since session 29): the largest of them
        segments.arrow         start (int64, S+1 rows: postings offset of each segment, plus the end),
                               impact (uint8 padded to S+1 rows): the impact shared by a segment's postings
        terms.arrow            seg_ptr (int64, V*C+1 rows): posting list id -> its first segment
        docs.arrow             docid, title, text (string), length (int32), prefix (string: the fields
                               indexed before the title, e.g. ORCAS clicks): the document store
      shard-00001/ ...
      .verified.json           not part of the index: which files matched their checksums, by stat, so
                               that an open does not hash them again (:mod:`indexer.stamps`)

A model stores ``C`` channels per term (:mod:`ckqti.models.qti`); channel ``c`` of term ``t``
is the posting list with id ``t * C + c``. Ids interleave so that terms added by an append
(new ids at the end of the vocabulary) never move an existing list. A shard's ``seg_ptr``
covers the vocabulary as it was when the shard was written: list ids beyond it are empty
in that shard. The manifest's ``channels`` gives each channel's weighting (``"one"``, or
``"idf"``: multiplied at query time by the idf of the index's current df and document count)
and its quantization step.

Postings of a list are split into *segments*, one per distinct quantized impact, in
descending impact order; inside a segment documents ascend. A posting stores only its
document number: its impact is the segment's. Every file is a single-batch Arrow IPC
file, so each column memory-maps to one contiguous numpy array that Numba reads
without a copy.

Version 2 added channels, interleaved list ids, per-shard vocabulary extents, the
collection statistics and the model constants appends need; a version 1 index must be
rebuilt.
A postings file's ``max_doc`` needed no new version: readers before it ignore schema
metadata, and a postings file without it is scanned for its largest document when opened.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, TypeVar

from ckqti.errors import IndexFormatError, is_real
from ckqti.files import naming_full_disk
from indexer.install import recover, stranded
from indexer.locks import running_build
from indexer.stamps import file_stat, forget, read_stamps, record, trusted

FORMAT_NAME = "ckqti-index"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
VOCAB_FILE = "vocab.arrow"
POSTINGS_FILE = "postings.arrow"
SEGMENTS_FILE = "segments.arrow"
TERMS_FILE = "terms.arrow"
DOCS_FILE = "docs.arrow"  # the document store: text for snippets, not postings
SHARD_FILES = (POSTINGS_FILE, SEGMENTS_FILE, TERMS_FILE, DOCS_FILE)
MAX_DOC_KEY = "max_doc"  # postings.arrow's schema metadata: its largest document number (none when it is empty)
T = TypeVar("T")
CHANNEL_WEIGHTS = ("one", "idf")  # the same as ckqti.models.qti.CHANNEL_WEIGHTS (not imported: no torch here)


def vocab_file_name(generation: int) -> str:
    """The vocabulary file of an index generation (0: the build's ``vocab.arrow``)."""
    return VOCAB_FILE if generation == 0 else f"vocab-{generation:05d}.arrow"


def shard_name(i: int) -> str:
    return f"shard-{i:05d}"


SHARD_RE = re.compile(r"shard-(\d+)$")
WORK_PREFIXES = (".append-", ".compact-")  # INDEX/.append-PID/, INDEX/.compact-PID/: a writer's work directory


def strays(directory: Path, manifest: "Manifest") -> list[Path]:
    """What an interrupted append or compaction left in the index ``directory``: its work
    directories and the shard directories and vocabulary files the manifest does not name
    (sorted by name). A folder holding a manifest is an index of its own that someone put
    there, never a leftover."""
    keep = {s.name for s in manifest.shards} | {manifest.vocab_file}
    found = []
    for p in directory.iterdir():
        shard = p.is_dir() and SHARD_RE.match(p.name) and p.name not in keep and not (p / MANIFEST).exists()
        vocab = p.is_file() and p.name.startswith("vocab") and p.suffix == ".arrow" and p.name not in keep
        work = p.is_dir() and p.name.startswith(WORK_PREFIXES)
        if shard or vocab or work:
            found.append(p)
    return sorted(found)


def unfinished_build(partial: Path, shown: str | None = None) -> str:
    """What the ``OUT.partial`` folder ``partial`` (written as ``shown``, default its path) is: a
    build running now, or one that was interrupted and that the same command resumes."""
    out = partial.with_name(partial.name.removesuffix(".partial"))
    pid = running_build(out)
    if pid is not None:
        return f"a build (process {pid}) is writing it in {shown or partial}"
    return f"an unfinished build is in {shown or partial}; the same ckqti index command resumes it"


def no_manifest(directory: Path) -> str:
    """Why a folder without a manifest is no index: a build's ``OUT.partial`` work folder says what resumes it."""
    if directory.name.endswith(".partial") and directory.name != ".partial":
        out = directory.with_name(directory.name.removesuffix(".partial"))
        return f"not an index but a build's work folder; {unfinished_build(directory, 'it')} (the index will be {out})"
    return "not a ckqti index (manifest.json missing)"


def file_checksum(path: str | Path, chunk: int = 1 << 22) -> str:
    """sha256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


@dataclass
class ShardInfo:
    name: str
    num_docs: int
    num_postings: int
    files: dict[str, str]  # file name -> sha256
    bytes: int = 0


@dataclass
class Manifest:
    """What an index is: enough to refuse a mismatched query-time setting and to verify files."""

    model: dict
    analyzer: dict
    quantization: dict
    num_docs: int
    num_postings: int
    vocab_size: int
    shards: list[ShardInfo]
    vocab_checksum: str
    corpus: dict = field(default_factory=dict)
    build: dict = field(default_factory=dict)
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    channels: list[dict] = field(default_factory=lambda: [{"weight": "one", "step": 1.0}])
    collection: dict = field(default_factory=dict)  # num_docs, total_terms: the statistics idf is computed from
    model_constants: dict = field(default_factory=dict)  # model.index_constants() of the build, reused by appends
    clipped_impacts: int = 0  # impacts above 255 * step, stored as 255: at build (forced steps) and by appends
    appends: list[dict] = field(default_factory=list)
    generation: int = 0  # appends and compactions so far
    vocab_file: str = VOCAB_FILE

    def __repr__(self) -> str:
        """A line of what the index is (:meth:`to_json` has every field): ``api.index`` returns a manifest, and its
        generated repr, the model's whole record and every shard's checksums, ran to 1,767 characters for one shard."""
        return (f"Manifest(model={self.model.get('id')!r}, num_docs={self.num_docs:,}, num_postings={self.num_postings:,}, "
                f"vocab_size={self.vocab_size:,}, shards={len(self.shards)}, channels={[c.get('weight') for c in self.channels]}, "
                f"format_version={self.format_version}, generation={self.generation})")

    @property
    def max_doc_terms(self) -> int | None:
        """The terms of a document the model read at build (later ones are not indexed); None if not recorded."""
        return self.build.get("impact_config", {}).get("max_doc_terms")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def write(self, directory: str | Path) -> None:
        """``manifest.json``, with the checksum of its own content (:data:`CHECKSUM_KEY`)."""
        body = asdict(self)
        body[CHECKSUM_KEY] = manifest_digest(body)
        with naming_full_disk(Path(directory, MANIFEST)):
            Path(directory, MANIFEST).write_text(json.dumps(body, indent=2, sort_keys=True))

    @classmethod
    def read(cls, directory: str | Path) -> "Manifest":
        path = Path(directory, MANIFEST)
        if Path(directory).is_file():
            raise IndexFormatError("is a file; an index is a directory", directory)
        if not Path(directory).exists():
            recover(Path(directory))  # the old index a killed two-rename --force swap left in OUT.old-PID
        if not Path(directory).is_dir():
            partial = Path(directory).with_name(Path(directory).name + ".partial")
            why = f"no index here yet: {unfinished_build(partial)}" if partial.is_dir() else "no such index directory"
            if old := stranded(Path(directory)):  # recover could not rename it back (a read-only parent)
                why += f"; the previous index waits in {old[0]} (an interrupted replace): rename it to {directory}"
            raise IndexFormatError(why, directory)
        if not path.is_file():
            raise IndexFormatError(no_manifest(Path(directory)), directory)
        try:
            d = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: "[[[[..." thousands deep
            why = "nested too deeply" if isinstance(e, RecursionError) else e.msg if hasattr(e, "msg") else e
            raise IndexFormatError(f"manifest is not valid JSON ({why})", path) from None
        if not isinstance(d, dict) or d.get("format") != FORMAT_NAME:
            raise IndexFormatError("not a ckqti index manifest", path)
        version = d.get("format_version")
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
            fix = "written by a newer ckqti: upgrade ckqti to read it" if newer else "rebuild the index"
            raise IndexFormatError(
                f"index format version {version!r} is not supported (this ckqti reads {FORMAT_VERSION}); {fix}", path)
        recorded = d.pop(CHECKSUM_KEY, None)  # manifests written before it have none
        if why := record_error(d, cls, "the manifest") or shards_error(d.get("shards")):
            raise IndexFormatError(f"manifest is malformed ({why})", path)
        d["shards"] = [ShardInfo(**s) for s in d["shards"]]
        manifest = cls(**d)
        manifest.check_fields(path)
        manifest.check_counts(path)
        manifest.check_channels(path)
        if not isinstance(manifest.vocab_file, str) or Path(manifest.vocab_file).name != manifest.vocab_file:
            raise IndexFormatError(f"manifest is malformed (vocab_file {manifest.vocab_file!r} is not a file "
                                   "name inside the index)", path)
        if recorded is not None and recorded != manifest_digest(asdict(manifest)):
            raise IndexFormatError("manifest was edited or damaged (its content does not match its checksum); "
                                   "rebuild the index", path)
        return manifest

    def check_fields(self, path: Path) -> None:
        """Each field has the type its readers use, and each shard is a folder inside the index with a
        checksum for each of its files: a manifest edited by hand or written by another program was
        a traceback where a reader used the field, and a shard named outside the index was deleted
        there by a compaction."""
        why = field_error(self) or next(filter(None, map(shard_error, self.shards)), None)
        if why:
            raise IndexFormatError(f"manifest is malformed ({why})", path)

    def check_counts(self, path: Path) -> None:
        """The shards' documents add up to the index's (a hand-edited manifest may disagree)."""
        listed = sum(s.num_docs for s in self.shards)
        if listed != self.num_docs:
            raise IndexFormatError(f"manifest is malformed (its shards hold {listed} documents, "
                                   f"its num_docs says {self.num_docs})", path)

    @property
    def num_channels(self) -> int:
        return len(self.channels)

    def check_channels(self, path: Path) -> None:
        ok = bool(self.channels) and all(
            isinstance(c, dict) and c.get("weight") in CHANNEL_WEIGHTS and isinstance(c.get("step"), (int, float)) and c["step"] > 0
            for c in self.channels
        )
        if not ok:
            raise IndexFormatError(f"manifest channels are malformed ({self.channels})", path)


CHECKSUM_KEY = "manifest_checksum"
# the manifest's fields that readers use as these types (checked by Manifest.check_fields)
FIELD_TYPES = {"model": dict, "analyzer": dict, "quantization": dict, "corpus": dict, "build": dict, "collection": dict,
               "model_constants": dict, "appends": list, "channels": list, "num_docs": int, "num_postings": int, "vocab_size": int,
               "clipped_impacts": int, "generation": int, "vocab_checksum": str}
TYPE_NAMES = {dict: "a record", list: "a list", int: "a count (an integer >= 0)", str: "text"}


def is_count(value, integer: bool = True) -> bool:
    """An integer (``integer``; else any real number, :func:`ckqti.errors.is_real`) >= 0, not a bool."""
    number = (isinstance(value, int) and not isinstance(value, bool)) if integer else is_real(value)
    return number and value >= 0


def field_error(m: Manifest) -> str | None:
    """Why a manifest's fields are not of the types its readers use (None: they are)."""
    for name, kind in FIELD_TYPES.items():
        value = getattr(m, name)
        if not (is_count(value) if kind is int else isinstance(value, kind)):
            return f"{name} {value!r} is not {TYPE_NAMES[kind]}"
    for what, entry, key in (("collection", m.collection, "num_docs"), ("collection", m.collection, "total_terms"),
                             ("build", m.build, "seconds")):
        if not is_count(value := entry.get(key, 0), integer=False):
            return f"the {what}'s {key} {value!r} is not a number >= 0"
    if not all(isinstance(a, dict) for a in m.appends):
        return "appends is not a list of records"
    if missing := sorted({"stemmer", "stopwords", "lowercase"} - m.analyzer.keys()):
        return f"the analyzer has no {', '.join(missing)}"
    if (bits := m.quantization.get("bits")) != 8 or isinstance(bits, bool):
        return f"quantization bits {bits!r} is not 8, the only width this ckqti reads"
    return None


def record_error(d: dict, cls: type, what: str) -> str | None:
    """Why ``d`` cannot be read as a ``cls`` (a dataclass): a field it needs is missing, or one it does not
    have is there (the reader's ``TypeError`` spoke of ``__init__()``'s arguments)."""
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    if missing := sorted(required - d.keys()):
        return f"{what} lacks the field(s) {', '.join(map(repr, missing))}"
    if unknown := sorted(d.keys() - names):
        return f"{what} has the field(s) {', '.join(map(repr, unknown))}, which this ckqti does not know"
    return None


def shards_error(shards) -> str | None:
    """Why a manifest's ``shards`` is not a list of shard records, each with :class:`ShardInfo`'s fields."""
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        return "shards is not a list of records"
    return next((why for i, s in enumerate(shards) if (why := record_error(s, ShardInfo, f"shard {i}"))), None)


def shard_error(s: ShardInfo) -> str | None:
    """Why a manifest's shard entry is not a shard folder inside the index with a checksum for each file."""
    if not isinstance(s.name, str) or not SHARD_RE.fullmatch(s.name):
        return f"shard name {s.name!r} is not a shard folder inside the index"
    if not isinstance(s.files, dict) or not all(isinstance(s.files.get(f), str) for f in SHARD_FILES):
        return f"{s.name} does not list a checksum for each of {', '.join(SHARD_FILES)}"
    for key in ("num_docs", "num_postings"):
        if not is_count(value := getattr(s, key)):
            return f"{s.name}'s {key} {value!r} is not {TYPE_NAMES[int]}"
    return None


def manifest_digest(body: dict) -> str:
    """sha256 of a manifest's content (without its checksum), as :meth:`Manifest.write` lays it out."""
    return hashlib.sha256(json.dumps(body, indent=2, sort_keys=True).encode()).hexdigest()


def verify_files(directory: Path, manifest: Manifest, stamps: bool = True) -> None:
    """Check that every file the manifest names exists with its recorded checksum.

    ``stamps``: files unchanged since they last matched the same checksum (by their stat,
    :mod:`indexer.stamps`) are not hashed again; False hashes every file (``ckqti info --verify``).
    A check that passes records the stamp; one that fails removes it.
    """
    expected = [(manifest.vocab_file, manifest.vocab_checksum)]
    for s in manifest.shards:
        expected += [(f"{s.name}/{f}", s.files[f]) for f in SHARD_FILES]
    started = time.time_ns()  # before any stat: the racy window counts from here, not from after the hashing
    old = read_stamps(directory)
    entries = {}
    for name, want in expected:
        if stamps and trusted(old, directory, name, want):
            entries[name] = old[name]
            continue
        path = directory / name
        if not path.is_file():
            forget(directory)
            raise IndexFormatError("index file missing", path)
        stat = file_stat(path)  # before hashing: a write meanwhile leaves the stamp stale, not wrong
        try:
            digest = file_checksum(path)
        except FileNotFoundError:  # removed since the test above: a compaction committed meanwhile
            forget(directory)
            raise IndexFormatError("index file missing", path) from None
        if digest != want:
            forget(directory)
            raise IndexFormatError("index file corrupted (checksum mismatch); rebuild the index", path)
        entries[name] = {"sha256": want, "stat": stat}
    record(directory, entries, old, now_ns=started)


OPEN_ATTEMPTS = 3  # reads of an index whose manifest a writer replaces meanwhile


def manifest_version(directory: Path) -> tuple[int, ...] | None:
    """Identity of the index folder and its manifest file now: an append or compaction replaces the
    manifest by a rename (a new inode), a rebuild in place swaps the whole folder (a new folder)."""
    try:
        folder, st = directory.stat(), (directory / MANIFEST).stat()
    except OSError:
        return None
    return folder.st_dev, folder.st_ino, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def read_consistently(directory: Path, read: Callable[[], T]) -> T:
    """``read()`` of the index in ``directory`` (its manifest, then the files it names, each by its
    path), done again where a writer committed meanwhile, so that what it returns comes from one
    version of the index. An append or compaction committing may remove files the old manifest names
    (an :class:`IndexFormatError`); a rebuild in place (``ckqti index --out INDEX --force``) installs
    files of the same names, which read without an error: a read is kept only when the manifest it
    began with is still the index's when it ends.

    Raises:
        IndexFormatError: ``read``'s own, where nothing changed during it; or the index was replaced
            during each of :data:`OPEN_ATTEMPTS` reads (then the last one's error, a missing or
            mismatched file, would only blame the writer's work on the index).
    """
    for _ in range(OPEN_ATTEMPTS):
        version = manifest_version(directory)
        try:
            result = read()
        except IndexFormatError:
            if manifest_version(directory) == version:
                raise
            continue  # not a damaged file: one the writer removed or replaced
        if version is not None and manifest_version(directory) == version:
            return result
    raise IndexFormatError(f"the index was replaced while it was being read, {OPEN_ATTEMPTS} times (a build, "
                           "append or compaction committing); open it again", directory)
