"""``ckqti index`` (and ``--append``), ``compact`` and ``info``: build, grow, merge and describe an index."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import echo, note, repeated_note
from ckqti.cli.options import (
    DEFAULT_INDEX,
    INDEX_ENV,
    POSITIVE,
    Integer,
    NameOrPath,
    OutPath,
    PathArg,
    default_index,
    device_option,
    index_option,
    index_or_default,
    quiet,
    quiet_option,
)
from ckqti.json_form import json_text
from ckqti.terminal import counted


@command("index", short_help="Build an index of CORPUS, or --append it to one.")
@click.argument("corpus", type=PathArg())
@click.option("--out", default=None, type=OutPath(),
              help=f"Index directory to create (default: ${INDEX_ENV}, else ./{DEFAULT_INDEX}).")
@click.option("--append", "append_to", is_flag=True, help="Add CORPUS to the index --index as new shards.")
@click.option("--index", "index_path", default=None, type=PathArg(),
              help=f"With --append: the index to grow (default: ${INDEX_ENV}, else ./{DEFAULT_INDEX}).")
@click.option("--model", default=None, type=NameOrPath(), help="'ndrm2' (untrained, the paper's start), 'ndrm2-anserini' (untrained, BM25 k1 0.9, b 0.4), "
              "'ndrm3-scifact' (the bundled model) or a checkpoint; default: the bundled model (--append: the index's).")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@click.option("--orcas", type=PathArg(), default=None, help="docid<TAB>query clicked queries, a leading field.")
@click.option("--shard-size", type=POSITIVE, default=100_000, show_default=True, help="Documents per shard.")
@click.option("--batch-size", type=POSITIVE, default=None, help="Documents scored at once (default: 32; --append: the index's).")
@device_option
@click.option("--force", is_flag=True, help="Replace an existing index.")
@click.option("--no-resume", is_flag=True, help="Discard a previous interrupted build.")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="Build on Ray: alone, a local Ray; 'auto' or HOST:PORT, the cluster of this node (OUT on a shared filesystem).")
@click.option("--workers", type=Integer(min=1), default=None, help="With --ray: model replicas (default: one per GPU, else per CPU).")
@click.option("--neighbours", type=Integer(min=0), default=None,
              help="Dense latent models: candidate terms per document beyond its own (default: 64; see docs/INDEX.md). "
                   "A gated model (ckqti train --latent-gate) stores exactly the pairs its gate opens.")
@quiet_option
def index_cmd(corpus, out, append_to, index_path, model, fmt, orcas, shard_size, batch_size, device, force, no_resume,
              ray_address, workers, neighbours):
    """Build an index of CORPUS (TSV, JSONL, TREC or SMART; plain or gzip), or with --append add it to one."""
    check_index_options(append_to, out, index_path, ray_address, workers, neighbours, force, no_resume)
    if append_to:
        index_path = index_or_default(index_path)
        m = api.append(corpus, index_path, model, fmt, orcas, shard_size, batch_size, device, progress=not quiet())
        echo(f"appended {counted(m.appends[-1]['num_docs'], 'document')}: {counted(m.num_docs, 'document')}, "
             f"{counted(m.num_postings, 'posting')}, {len(m.shards)} shard(s) in {index_path}"
             + (clicked_note(m.appends[-1]["corpus"].get("orcas_documents")) if orcas else ""))
        if orcas:
            repeated_note(m.appends[-1]["corpus"].get("orcas_repeated"), orcas)
        if clipped := m.appends[-1].get("clipped_impacts"):
            note(f"note: {counted(clipped, 'impact')} of the new documents exceeded the build's largest: stored "
                 "as 255 (`ckqti info` counts clipped impacts; rebuild if many: docs/INDEX.md)")
        truncated_note(m.appends[-1].get("truncated_documents"), m)
        return
    out = default_index() if out is None else out
    m = api.index(corpus, out, model, fmt, orcas, shard_size, force=force, resume=not no_resume, device=device,
                  ray_address=ray_address, workers=workers, neighbours=neighbours, progress=not quiet(),
                  **({} if batch_size is None else {"batch_size": batch_size}))
    echo(f"indexed {counted(m.num_docs, 'document')}, {counted(m.num_postings, 'posting')}, {len(m.shards)} shard(s) "
         f"-> {out}"
         + (clicked_note(m.corpus.get("orcas_documents")) if orcas else ""))
    if orcas:
        repeated_note(m.corpus.get("orcas_repeated"), orcas)
    truncated_note(m.build.get("truncated_documents"), m)


def truncated_note(documents: int | None, manifest) -> None:
    """A note on stderr when ``documents`` (of a build or append of the index of ``manifest``) are longer than
    the model reads: a term only past that many is not indexed for them (a search for it does not find them)."""
    if documents:
        cap = manifest.max_doc_terms
        note(f"note: {counted(documents, 'document')} longer than the model reads ({cap:,} terms, with any ORCAS "
             "field): terms past that are not indexed for them")


def check_index_options(append_to: bool, out, index_path, ray_address, workers, neighbours, force: bool,
                        no_resume: bool) -> None:
    """Options of ``ckqti index`` that do not combine: a usage error rather than an option silently unused."""
    if workers is not None and ray_address is None:
        raise click.UsageError("--workers needs --ray")
    if not append_to:
        if index_path is not None:
            raise click.UsageError("--index names the index to grow with --append; a new index is --out OUT")
        return
    if out is not None:
        raise click.UsageError("--append takes the index to grow as --index INDEX (not --out)")
    for given, option, why in ((ray_address is not None, "--ray", "--ray builds a new index"),
                               (neighbours is not None, "--neighbours", "--neighbours is fixed when an index is built; "
                                                                        "--append uses the index's"),
                               (force, "--force", "--force replaces an index that --out names"),
                               (no_resume, "--no-resume", "--no-resume concerns an interrupted build of --out")):
        if given:
            raise click.UsageError(f"{why}; {option} does not combine with --append")


def clicked_note(documents: int | None) -> str:
    """How many documents ORCAS clicks were joined to, where the manifest says (older builds do not)."""
    return "" if documents is None else f" (clicks joined to {counted(documents, 'document')})"


@command("compact", short_help="Merge an index's shards into fewer (exact results unchanged).")
@index_option
@click.option("--shard-size", type=POSITIVE, default=100_000, show_default=True, help="Documents per merged shard at most.")
def compact_cmd(index_path, shard_size):
    """Merge an index's consecutive shards into fewer (no rescoring; exact results are unchanged)."""
    m = api.compact(index_path, shard_size)
    echo(f"{len(m.shards)} shard(s), {counted(m.num_docs, 'document')} in {index_path}")


@command("info", short_help="What an index holds: documents, postings, model, size.")
@index_option
@click.option("--verify", is_flag=True, help="Also hash every file and check its checksum (search does too, but skips files unchanged since their last check).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
def info_cmd(index_path, verify, as_json):
    """What an index holds: documents, postings, shards, model, analyzer, channels, bytes on disk."""
    info = api.info(index_path, verify)
    if as_json:
        click.echo(json_text(info.to_dict()))
        return
    for line in info_lines(info):
        echo(line)


def human_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit it reaches (``1.5 MiB``)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def info_lines(info) -> list[str]:
    """``ckqti info``'s lines of an :class:`retriever.info.IndexInfo`."""
    size = {k: human_bytes(v) for k, v in info.bytes.items()}
    analyzer = ", ".join(f"{k} {v}" for k, v in sorted(info.analyzer.items()))
    quant = ", ".join(f"{k} {v}" for k, v in sorted(info.quantization.items()))
    lines = [
        f"index       {info.path} (format {info.format_version})",
        f"model       {info.model.get('id', '?')}" + (f" ({info.model['name']})" if info.model.get("name") else ""),
        f"analyzer    {analyzer}",
        f"documents   {info.num_docs:,} in {len(info.shards)} shard(s)",
        f"postings    {info.num_postings:,} ({info.num_postings / max(info.num_docs, 1):.1f} a document)",
        f"vocabulary  {info.vocab_size:,} terms; channels {', '.join(info.channels)}; quantization {quant}",
        f"disk        {size['total']}: postings {size['postings']}, documents {size['documents']}, "
        f"vocabulary {size['vocabulary']}",
    ]
    if info.corpus:
        built = f" in {info.build_seconds:.1f} s" if info.build_seconds is not None else ""
        changes = [f"{n} {what}(s)" for n, what in ((info.appends, "append"), (info.compactions, "compaction")) if n]
        since = f"; {', '.join(changes)} since" if changes else ""
        clicks = f" with ORCAS clicks from {info.orcas}{clicked_note(info.orcas_documents)}" if info.orcas else ""
        lines.append(f"built from  {info.corpus}{clicks}{built}{since}")
    if info.appended_orcas:
        lines.append(appended_clicks_line(info.appended_orcas_files(), info.orcas is not None, info.clicked_documents))
    if info.clipped_impacts:
        lines.append(clipped_line(info.clipped_impacts, info.appended_clipped_impacts))
    if info.unfinished:
        lines.append(f"unfinished  {info.unfinished} " + (f"(a build in progress, process {info.building})" if info.building
                     else "(an interrupted build; the same ckqti index command resumes it)"))
    if info.leftovers:
        lines.append(leftovers_line(info.leftovers, size["leftovers"], info.writing))
    lines.append("checksums   " + ("verified" if info.verified else "not checked (--verify)"))
    return lines


def appended_clicks_line(files: dict[str, tuple[list[int], int | None]], at_build: bool, total: int | None) -> str:
    """The ORCAS files appends joined (``index --append --orcas``), each with its appends and the documents it
    reached (:meth:`retriever.info.IndexInfo.appended_orcas_files`); with the build's clicks too, the documents
    with clicks in all."""
    parts = [f"by append{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))} from {orcas}"
             f"{clicked_note(documents)}" for orcas, (numbers, documents) in files.items()]
    in_all = [f"{total:,} documents with clicks in all"] if at_build and total is not None else []
    return f"clicks      {'; '.join(parts + in_all)}"


def clipped_line(clipped: int, appended: int) -> str:
    """Impacts stored as 255 though above 255 quantization steps: at build time (only forced steps
    clip there) and by appends (new documents scoring above the build's largest)."""
    parts = [f"{clipped - appended:,} at build (forced quantization steps)"] if clipped > appended else []
    parts += [f"{appended:,} appended, above the build's largest"] if appended else []
    return f"clipped     {counted(clipped, 'impact')} stored as 255: {'; '.join(parts)}"


def leftovers_line(names: list[str], size: str, writing: int | None) -> str:
    """What an interrupted append or compaction left in the index, or what a running one has written so far."""
    shown = ", ".join(n + ("" if n.endswith(".arrow") else "/") for n in names[:3])
    shown += f" and {len(names) - 3} more" if len(names) > 3 else ""
    if writing is not None:
        return f"writing     an append or compaction (process {writing}) is writing: {size} so far ({shown})"
    return (f"leftovers   {len(names)} item(s), {size}, of an interrupted append or compaction ({shown}); "
            "the next ckqti index --append or ckqti compact removes them")
