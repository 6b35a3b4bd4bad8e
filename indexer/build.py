"""Building an index: analyze, score impacts per shard, quantize, write, rename.

Everything is written under ``OUT.partial/``; the finished index is renamed into place
only when complete, so an interrupted build never leaves a half-written index and a
previous index at ``OUT`` stays intact until the new one replaces it. Rerunning the
same build resumes: the analyzed corpus (written as it is read, and read back
memory-mapped, so the corpus's text never has to fit in memory) and each shard's float
impacts are saved as they complete (``analyzed/``, ``raw/shard-NNNNN.npz``) under a
fingerprint of the inputs; a build with other inputs starts over.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, astuple, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from tqdm.auto import tqdm

from ckqti.errors import CkqtiError, DiskFullError, OptionError
from ckqti.files import naming_full_disk, replacing
from ckqti.progress import progress_bar
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary
from indexer.analyze import AnalyzedCorpus, analyze_corpus
from indexer.format import FORMAT_VERSION, VOCAB_FILE, Manifest, ShardInfo, file_checksum, shard_name
from indexer.impacts import ImpactConfig, ImpactScorer
from indexer.install import install, recover
from indexer.locks import build_lock_path, exclusive
from indexer.paths import check_build_paths, corpus_file, output_path
from indexer.quantize import Quantizer
from indexer.readers import Document
from indexer.shards import ImpactPostings, write_shard, write_table


@dataclass(frozen=True)
class BuildConfig:
    """Args:
    shard_size: documents per shard.
    impacts: how impacts are computed.
    analyzer: text analysis (recorded in the manifest).
    channel_steps: force these quantization steps, one per model channel, instead of fitting
        them to the largest scores (to compare an index with another one's steps).
    """

    shard_size: int = 100_000
    impacts: ImpactConfig = field(default_factory=ImpactConfig)
    analyzer: Analyzer = field(default_factory=Analyzer)
    channel_steps: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.shard_size < 1:
            raise ValueError("shard_size must be >= 1")
        if self.channel_steps is not None:
            steps = tuple(float(x) for x in self.channel_steps)
            if not steps or not all(x > 0 and np.isfinite(x) for x in steps):
                raise ValueError(f"channel_steps must be positive and finite, got {self.channel_steps}")
            object.__setattr__(self, "channel_steps", steps)


def model_build_config(info: dict, shard_size: int, batch_size: int, neighbours: int | None) -> BuildConfig:
    """:func:`ckqti.api.index`'s settings for the model whose manifest entry is ``info`` (``load_qti_model``'s):
    ``neighbours`` (None: :class:`~indexer.impacts.ImpactConfig`'s) only for a dense latent model, else an
    :class:`~ckqti.errors.OptionError`; text read with the analyzer the checkpoint was trained with."""
    if neighbours is not None and info.get("variant") == "ndrm2":
        raise OptionError("neighbours are for dense latent models; NDRM2 has no latent channel (it stores each "
                          "document's own terms)", ("neighbours",))
    if neighbours is not None and info.get("latent_gate") is not None:
        raise OptionError(f"neighbours are for dense latent models; this model's latent channel is gated at cosine "
                          f"{info['latent_gate']} and its index stores exactly the pairs the gate opens", ("neighbours",))
    impacts = ImpactConfig(batch_size=batch_size, **({} if neighbours is None else {"neighbours": neighbours}))
    # a checkpoint reads text with the analyzer it was trained with (the untrained NDRM2: the default)
    analyzer = Analyzer.from_dict(info["analyzer"]) if info.get("analyzer") else Analyzer()
    return BuildConfig(shard_size=shard_size, impacts=impacts, analyzer=analyzer)


def fingerprint(corpus: Path | Sequence[Document], fmt: str | None, orcas: Path | None, model_info: dict,
                config: BuildConfig) -> str:
    parts = {
        "corpus": _file_id(corpus) if isinstance(corpus, Path) else _documents_id(corpus),
        "orcas": _file_id(orcas) if orcas else None,
        "fmt": fmt,
        "model": model_info.get("id"),
        "shard_size": config.shard_size,
        "impacts": repr(config.impacts),
        "analyzer": config.analyzer.to_dict(),
        "channel_steps": config.channel_steps,
        "format_version": FORMAT_VERSION,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _file_id(path: Path) -> dict:
    """An input file by its path and content: its size and modification time stay the same
    through an edit within the clock's resolution or a copy that keeps the times (``cp -p``), and
    a resume then mixed impacts of the old text into the new index. Hashing reads the file
    once more than a resumed build would (whose analyzed corpus is saved)."""
    return {"path": str(path.resolve()), "sha256": file_checksum(path)}


def _documents_id(docs: Sequence[Document]) -> dict:
    """In-memory documents by their content, as :func:`_file_id` names a file: an interrupted build of the
    same documents resumes."""
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(json.dumps(astuple(doc)).encode())
    return {"documents": len(docs), "sha256": digest.hexdigest()}


def prepare_workdir(work: Path, fp: str, resume: bool, progress: bool = False) -> None:
    """Reuse ``work`` if it holds a build of the same inputs (and resume is on), else start clean.
    With ``progress``, a note on stderr says whether an interrupted build found there was resumed
    or discarded."""
    stamp = work / "FINGERPRINT"
    note = None
    if work.exists():
        same = stamp.is_file() and stamp.read_text() == fp
        if resume and same:
            note = f"resuming the interrupted build in {work}"
        else:
            why = "asked not to resume" if not resume else "it was of other inputs or settings"
            note = f"discarding the interrupted build in {work} ({why}): starting over"
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    with naming_full_disk(stamp):
        stamp.write_text(fp)
    if note and progress:
        tqdm.write(f"note: {note}", file=sys.stderr)


def save_npz_atomic(path: Path, **arrays: np.ndarray) -> None:
    with replacing(path) as tmp, open(tmp, "wb") as f:  # a file object: np.savez adds no ".npz" to its name
        np.savez(f, **arrays)


RAW_ARRAYS = ("lists", "docs", "scores", "weights", "maxima")


def read_saved_shard(path: Path) -> dict[str, np.ndarray] | None:
    """A shard's saved float impacts, all read once to check them; ``None`` (and the file removed)
    when there are none or they cannot be read (a damaged work folder is scored again, not a
    traceback at every rerun)."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as z:
            saved = {name: z[name] for name in RAW_ARRAYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        path.unlink(missing_ok=True)
        return None
    if not saved["lists"].shape == saved["docs"].shape == saved["scores"].shape:
        path.unlink(missing_ok=True)
        return None
    return saved


def shard_ranges(num_docs: int, shard_size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` document ranges of the shards, in order."""
    return [(s, min(num_docs, s + shard_size)) for s in range(0, num_docs, shard_size)]


def score_shard(corpus: AnalyzedCorpus, scorer: ImpactScorer, start: int, stop: int, path: Path, progress=None) -> np.ndarray:
    """Float impacts of documents ``[start, stop)`` saved to ``path`` (npz: ``lists``, ``docs``,
    ``scores``, ``maxima``, ``weights``); returns the largest impact of each channel (float64[C]).
    An existing ``path`` is a finished shard and is only read (scored again if it cannot be)."""
    saved = read_saved_shard(path)
    if saved is not None:
        return saved["maxima"].astype(np.float64)
    lists, scores = [], []
    for imp in scorer.score_all(corpus.token_lists(start, stop), progress=progress):
        lists.append(imp.lists)
        scores.append(imp.scores)
    # each document's arrays are let go as they are joined, and the document numbers made from the
    # counts: a shard's arrays are held about once over, not three times (MS MARCO's documents:
    # ~85M postings a shard of 100k, 12 bytes each)
    counts = np.fromiter((a.size for a in lists), np.int64, len(lists))
    lists = np.concatenate(lists) if lists else np.zeros(0, np.int32)
    scores = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    channel = lists % len(scorer.channels)
    maxima = np.array([np.max(scores, where=channel == c, initial=0) for c in range(len(scorer.channels))], np.float64)
    del channel
    docs = np.repeat(np.arange(counts.size, dtype=np.uint32), counts)
    save_npz_atomic(path, lists=lists, docs=docs, scores=scores, weights=np.array(scorer.channels), maxima=maxima)
    return maxima


def score_shards(corpus: AnalyzedCorpus, scorer: ImpactScorer, config: BuildConfig, raw: Path, progress: bool) -> np.ndarray:
    """Float impacts of every shard into ``raw/``; returns the largest impact of each channel."""
    raw.mkdir(exist_ok=True)
    ranges = shard_ranges(len(corpus), config.shard_size)
    done = sum(stop - start for i, (start, stop) in enumerate(ranges) if (raw / f"{shard_name(i)}.npz").is_file())
    bar = progress_bar(total=len(corpus), initial=done, desc="impacts", unit="doc", show=progress)
    top = np.zeros(len(scorer.channels), np.float64)
    for i, (start, stop) in enumerate(ranges):
        top = np.maximum(top, score_shard(corpus, scorer, start, stop, raw / f"{shard_name(i)}.npz", progress=bar))
    bar.close()
    return top


def fit_quantizer(maxima: np.ndarray, channels: tuple[str, ...], steps: tuple[float, ...] | None = None) -> Quantizer:
    """The index's quantizer: one step per channel fitted to ``maxima`` (largest score of each
    channel, see :func:`score_shard`), or the given ``steps``."""
    if steps is not None:
        if len(steps) != len(channels):
            raise ValueError(f"{len(steps)} channel steps given for a model with channels {channels}")
        return Quantizer(tuple(steps), weights=tuple(channels))
    return Quantizer.fit(maxima, weights=tuple(channels))


def write_index(
    directory: Path,
    shards: Iterable[tuple[ImpactPostings, dict[str, list]]],
    vocab: Vocabulary,
    offsets: np.ndarray,
    quantizer: Quantizer,
    model_info: dict,
    analyzer: dict,
    corpus: dict | None = None,
    build: dict | None = None,
    constants: dict | None = None,
    clipped: int = 0,
) -> Manifest:
    """Write shards (quantized postings + document store columns), the vocabulary and the manifest."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    infos = []
    for i, (postings, docs) in enumerate(shards):
        infos.append(write_shard(directory, shard_name(i), postings, len(vocab), docs))
        del postings, docs  # else held while the next shard's are read
    return finish_index(directory, infos, vocab, offsets, quantizer, model_info, analyzer, corpus, build, constants, clipped)


def finish_index(
    directory: Path,
    infos: list[ShardInfo],
    vocab: Vocabulary,
    offsets: np.ndarray,
    quantizer: Quantizer,
    model_info: dict,
    analyzer: dict,
    corpus: dict | None = None,
    build: dict | None = None,
    constants: dict | None = None,
    clipped: int = 0,
) -> Manifest:
    """Write the vocabulary and, last, the manifest of shards already written to ``directory``.

    ``constants`` is the model's ``index_constants()`` (appends reuse them); ``clipped`` the
    count of impacts clipped at the top level (only forced steps clip)."""
    write_vocab(directory / VOCAB_FILE, vocab, offsets)
    manifest = Manifest(
        model=model_info,
        analyzer=analyzer,
        quantization=quantizer.to_dict(),
        num_docs=sum(i.num_docs for i in infos),
        num_postings=sum(i.num_postings for i in infos),
        vocab_size=len(vocab),
        shards=infos,
        vocab_checksum=file_checksum(directory / VOCAB_FILE),
        corpus=corpus or {},
        build=build or {},
        channels=quantizer.channel_dicts(),
        collection={"num_docs": int(vocab.num_docs), "total_terms": int(vocab.total_terms)},
        model_constants=dict(constants or {}),
        clipped_impacts=int(clipped),
    )
    manifest.write(directory)
    return manifest


def write_vocab(path: Path, vocab: Vocabulary, offsets: np.ndarray) -> None:
    """``vocab.arrow``: term, df, cf and the latent offset of every term id."""
    write_table(
        path,
        {
            "term": pa.array(vocab.terms, pa.string()),
            "df": vocab.df[: len(vocab)],
            "cf": vocab.cf[: len(vocab)],
            "offset": np.asarray(offsets, dtype=np.float32),
        },
    )


# Postings quantized at a time (:func:`quantize_raw`): the quantizer works in float64, and a whole
# shard's temporaries were ~40 bytes a posting (360 MB for 9.3M postings)
QUANTIZE_BLOCK = 1 << 20


def quantized_shard(raw_path: Path, quantizer: Quantizer) -> ImpactPostings:
    """One shard's quantized postings, read back from its float impacts."""
    return quantize_raw(raw_path, quantizer)[0]


def quantize_raw(raw_path: Path, quantizer: Quantizer) -> tuple[ImpactPostings, int]:
    """One shard's quantized postings and the count of impacts clipped at the top level."""
    with np.load(raw_path) as z:
        weights = tuple(str(w) for w in z["weights"])
        if weights != quantizer.weights:
            raise ValueError(f"{raw_path} holds channels {weights}, the quantizer {quantizer.weights}")
        lists, scores = z["lists"], z["scores"]
        impacts, clipped = np.empty(lists.size, np.uint8), 0
        for s in range(0, lists.size, QUANTIZE_BLOCK):
            part, channel = scores[s: s + QUANTIZE_BLOCK], lists[s: s + QUANTIZE_BLOCK] % quantizer.channels
            impacts[s: s + QUANTIZE_BLOCK] = quantizer.quantize(part, channel)
            clipped += quantizer.clipped(part, channel)
        return ImpactPostings(lists, z["docs"], impacts, quantizer.channels), clipped


def quantized_shards(corpus: AnalyzedCorpus, quantizer: Quantizer, config: BuildConfig, raw: Path):
    """Each shard's quantized postings and document columns, read back from ``raw/``."""
    for i, (start, stop) in enumerate(shard_ranges(len(corpus), config.shard_size)):
        yield quantized_shard(raw / f"{shard_name(i)}.npz", quantizer), corpus.doc_table(start, stop)


def count_clipped(corpus: AnalyzedCorpus, quantizer: Quantizer, config: BuildConfig, raw: Path) -> int:
    """Impacts above the top level over all shards in ``raw/`` (none unless the steps were forced)."""
    if config.channel_steps is None:
        return 0
    return sum(quantize_raw(raw / f"{shard_name(i)}.npz", quantizer)[1] for i in range(len(shard_ranges(len(corpus), config.shard_size))))


def write_prebuilt_index(out: Path, shards: list[ImpactPostings], vocab_size: int, num_docs: int, step: float = 1.0) -> Manifest:
    """An index from already-quantized postings (benchmarks, tests): term ``i`` is named ``str(i)``,
    document ``j`` of a shard is named by its global number; no text is stored."""
    counts = np.zeros(vocab_size, np.int64)
    for p in shards:
        counts += np.bincount(p.terms, minlength=vocab_size)
    vocab = Vocabulary([str(i) for i in range(vocab_size)], counts, counts.copy(), num_docs, int(counts.sum()))
    columns, base = [], 0
    for p in shards:
        n = int(p.docs.max()) + 1 if p.docs.size else 0
        ids = [str(base + j) for j in range(n)]
        columns.append({"docid": ids, "title": [""] * n, "text": [""] * n, "length": [0] * n})
        base += n
    model = {"id": "prebuilt", "name": "prebuilt"}
    analyzer = {"stemmer": "none", "stopwords": "none", "lowercase": True}
    return write_index(Path(out), zip(shards, columns), vocab, np.zeros(vocab_size), Quantizer(step), model, analyzer)


def build_lock(out: Path):
    """One build of ``out`` at a time (``OUT.lock`` beside it, :func:`indexer.locks.exclusive`): a
    second one would resume, or delete, the first's ``OUT.partial``. Folders above ``out`` are made."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return exclusive(build_lock_path(out), "another build is writing this index", out)


def build_index(
    corpus_path: str | Path | Sequence[Document],
    out: str | Path,
    model,
    model_info: dict,
    config: BuildConfig = BuildConfig(),
    fmt: str | None = None,
    orcas: str | Path | None = None,
    force: bool = False,
    resume: bool = True,
    progress: bool = True,
) -> Manifest:
    """Build an index of ``corpus_path`` at ``out`` with a QTI ``model``.

    ``corpus_path`` may instead be documents already read (:func:`indexer.readers.read_documents`),
    without ``fmt`` or ``orcas``. ``model`` may be a callable ``vocab -> QTIModel`` so that models
    needing the corpus vocabulary (idf, embedding rows) are prepared after analysis.
    """
    corpus_path = corpus_file(corpus_path) or corpus_path  # a Path, or documents in memory
    out = output_path(out)
    orcas = Path(orcas) if orcas else None
    recover(out)
    check_build_paths(corpus_file(corpus_path), orcas, out, force, fmt)
    work = out.with_name(out.name + ".partial")
    with build_lock(out):
        prepare_workdir(work, fingerprint(corpus_path, fmt, orcas, model_info, config), resume, progress)
        try:
            return _build(corpus_path, out, work, model, model_info, config, fmt, orcas, force, progress)
        except DiskFullError:
            shutil.rmtree(work / "final", ignore_errors=True)  # no half index; what is finished resumes
            raise
        except CkqtiError:
            shutil.rmtree(work, ignore_errors=True)  # bad input: nothing worth resuming
            raise


def corpus_record(corpus_path: Path | None, fmt: str | None, orcas: Path | None, clicked: int = 0,
                  repeated: int = 0) -> dict:
    """The manifest's ``corpus`` entry: where the documents came from, as absolute paths (``info``
    names them wherever it runs; None: documents given in memory), and with ORCAS clicks how many
    documents got any and how many repeated lines were dropped (:func:`indexer.readers.load_orcas`)."""
    record = {"path": str(Path(corpus_path).absolute()) if corpus_path is not None else None, "format": fmt,
              "orcas": str(Path(orcas).absolute()) if orcas else None}
    return record | ({"orcas_documents": clicked, "orcas_repeated": repeated} if orcas else {})


def build_record(config: BuildConfig, t0: float, vocab: Vocabulary, **extra) -> dict:
    """The manifest's ``build`` entry: settings, seconds since ``t0``, collection size, and ``extra``
    (``truncated_documents``: documents longer than the model reads, whose later terms score nothing)."""
    return {
        "shard_size": config.shard_size,
        "impacts": repr(config.impacts),
        "impact_config": asdict(config.impacts),
        "seconds": round(time.time() - t0, 3),
        "num_docs": vocab.num_docs,
        "total_terms": vocab.total_terms,
        **extra,
    }


def _build(corpus_path, out, work, model, model_info, config, fmt, orcas, force, progress) -> Manifest:
    t0 = time.time()
    corpus = AnalyzedCorpus.load(work / "analyzed")
    if corpus is None:
        bar = progress_bar(desc="analyze", unit="doc", show=progress)
        corpus = analyze_corpus(corpus_path, config.analyzer, fmt=fmt, orcas=orcas, progress=bar, directory=work / "analyzed")
        bar.close()
    qti = model(corpus.vocab) if callable(model) and not hasattr(model, "encode_documents") else model
    scorer = ImpactScorer(qti, corpus.vocab.df, config.impacts)
    offsets = scorer.fit_offsets(corpus.token_lists(0, len(corpus)), len(corpus.vocab))
    top = score_shards(corpus, scorer, config, work / "raw", progress)
    quantizer = fit_quantizer(top, scorer.channels, config.channel_steps)
    manifest = write_index(
        work / "final",
        quantized_shards(corpus, quantizer, config, work / "raw"),
        corpus.vocab,
        offsets,
        quantizer,
        model_info,
        config.analyzer.to_dict(),
        corpus=corpus_record(corpus_file(corpus_path), fmt, orcas, corpus.clicked, corpus.repeated),
        build=build_record(config, t0, corpus.vocab, truncated_documents=corpus.longer_than(config.impacts.max_doc_terms)),
        constants=qti.index_constants(),
        clipped=count_clipped(corpus, quantizer, config, work / "raw"),
    )
    install(work / "final", out, force)
    shutil.rmtree(work, ignore_errors=True)
    return manifest
