"""``ckqti`` command line: each command parses options and calls one function of :mod:`ckqti.api`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading

import click

from ckqti import __version__, api
from ckqti.errors import CkqtiError, OptionError
from ckqti.terminal import columns_of, counted, decoded_argument, escaped_output, repaired, visible


class Integer(click.IntRange):
    """An integer option within a range: shown as ``INTEGER`` with its range after the help (``[x>=1]``),
    and a value that is no integer is "not a valid integer", as click says of a plain ``int``."""

    name = "integer"


class Float(click.FloatRange):
    """A number option within a range: shown as ``FLOAT`` with its range after the help, as :class:`Integer`."""

    name = "float"


POSITIVE = Integer(min=1)  # counts: results, shard and batch sizes, threads, epochs
UNKNOWN_WORDS_NOTE = 0.02  # rerank's note: this share of the candidates' words unknown to the model (SciFact's own: 0)
SNIPPET_COLUMNS = 100  # terminal columns of a search hit's title and snippet lines (cut between words)


def home_expanded(value):
    """A path's leading ``~`` or ``~user`` as the home folder, as the shell would have it where it
    leaves it alone (``--out=~/idx``, a quoted ``"~/idx"``); anything else as it is."""
    return os.path.expanduser(value) if isinstance(value, str) and value.startswith("~") else value


class EmbeddingStart(click.ParamType):
    """``--embeddings``: a named start (skipgram, minilm, random) or an existing checkpoint file (``.pt``)."""

    name = "skipgram|minilm|random|FILE.pt"

    def convert(self, value, param, ctx):
        from pathlib import Path

        from ckqti.train.embedding_init import EMBEDDING_INITS

        value = home_expanded(value)
        if value in EMBEDDING_INITS or (str(value).endswith(".pt") and Path(value).is_file()):
            return str(value)
        self.fail(f"{value!r} is neither one of {', '.join(EMBEDDING_INITS)} nor an existing checkpoint file (.pt)",
                  param, ctx)


class Command(click.Command):
    """An :class:`OptionError` of the command is a usage error in the command's context: exit 2 with
    its ``Usage:`` line, as click's own usage errors (raised from the group, it had none). A
    :class:`DefaultIndexOption` is resolved here, after click has parsed (and checked) every option.
    A stray argument is click's usage error, with the option it was likely meant for (:func:`stray_hint`)."""

    allow_extra_args = True  # parse_args refuses them itself, to say more than click

    def parse_args(self, ctx, args):
        rest = super().parse_args(ctx, args)
        if ctx.resilient_parsing:
            return rest
        if ctx.args:
            plural = "s" if len(ctx.args) > 1 else ""
            hint = stray_hint(ctx, ctx.args[0]) if len(ctx.args) == 1 else ""
            ctx.fail(f"Got unexpected extra argument{plural} ({' '.join(ctx.args)}){hint}")
        words = ctx.params.get("query")  # search's, quoted or not: its last word may be an index meant for --index
        if isinstance(words, tuple) and len(words) > 1 and (hint := stray_hint(ctx, words[-1])):
            ctx.fail(f"QUERY's last word {words[-1]} is a folder{hint}")
        return rest

    def invoke(self, ctx):
        for param in self.params:  # every parameter is parsed: a missing required one was said first (exit 2)
            if isinstance(param, DefaultIndexOption):
                ctx.params[param.name] = index_or_default(ctx.params[param.name])
        try:
            return super().invoke(ctx)
        except OptionError as e:
            close_progress_bars()
            raise click.UsageError(visible(e.as_flags()), ctx) from None


def stray_hint(ctx: click.Context, arg: str) -> str:
    """What the stray argument ``arg`` was likely meant for, as ``"; give ..."``: the index to write where
    ``index`` has no ``--out``, an index folder where a command has no ``--index``; else nothing."""
    from click.core import ParameterSource

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    if ctx.command.name == "index":
        return "" if given("out") or os.path.isfile(arg) else f"; give the index to write as --out {arg}"
    if "index_path" in ctx.params and not given("index_path") and os.path.isdir(arg):
        return f"; give the index as --index {arg}"
    return ""


class Group(click.Group):
    """Turns every :class:`CkqtiError`, an operating system's refusal (a read-only folder, a full
    disk) and a file cut short that no reader named, into a one-line message and a non-zero exit;
    Ctrl-C into ``interrupted`` and exit 130. Its commands are :class:`Command` instances."""

    command_class = Command

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except OptionError as e:  # options that do not apply or combine: a usage error (exit 2), as click's own
            close_progress_bars()
            raise click.UsageError(visible(e.as_flags())) from None
        except CkqtiError as e:
            close_progress_bars()
            raise click.ClickException(visible(str(e))) from None
        except KeyboardInterrupt:  # child processes ignore it: they were ended on the way here
            close_progress_bars()
            echo("interrupted", err=True)
            sys.exit(130)
        except EOFError as e:  # data cut short where no reader names its file (click would print a bare "Aborted!")
            close_progress_bars()
            raise click.ClickException(visible(f"a file ended before its data did ({str(e) or 'EOFError'}): "
                                               "an interrupted download or copy?")) from None
        except BrokenPipeError:  # the reader left (`ckqti info | head -1`): nothing to say to it
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit must not fail again
            sys.exit(1)
        except OSError as e:
            close_progress_bars()
            where = e.filename2 or e.filename
            raise click.ClickException(visible(f"{where}: {e.strerror or e}" if where else str(e))) from None


def echo(text: str, err: bool = False) -> None:
    """``click.echo`` of a line that may hold document text, ids or paths: what would act on the
    terminal (escape sequences, carriage returns, bidirectional overrides) is written as escapes."""
    click.echo(visible(text), err=err)


def close_progress_bars() -> None:
    """Close the progress bars a failed command left open, so that its error starts a line of its own."""
    from tqdm.auto import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def qrels_format_option(f):
    """``--qrels-format`` of every command reading judgements (eval, train)."""
    return click.option("--qrels-format", type=click.Choice(["trec", "beir", "cranfield"]), default=None,
                        help="trec: qid iter docid grade; beir: query-id corpus-id grade; cranfield: qid docid code "
                             "(1 best .. 4, -1 not relevant). Default: from the first line (ambiguous 3-column files "
                             "ask).")(f)


def device_option(f):
    """``--device`` of every command that runs a model (index, train, rerank, explain)."""
    return click.option("--device", default=None, metavar="DEVICE",
                        help="torch device, e.g. cpu or cuda:1 (default: cuda if available).")(f)


def rel_level_option(decides: str):
    """``--rel-level`` of a command that decides which judged documents are relevant (eval, train); ``decides``:
    what the grade decides there, for its help."""
    return click.option("--rel-level", type=POSITIVE, default=1, show_default=True,
                        help=f"Grade from which a judged document counts relevant: {decides} (TREC DL passages: 2).")


class PathArg(click.Path):
    """Every path option and argument: a leading ``~`` is the home folder (:func:`home_expanded`),
    rather than a folder named ``~`` in the working directory."""

    def convert(self, value, param, ctx):
        return super().convert(home_expanded(value), param, ctx)


class OutPath(PathArg):
    """A file or folder a command writes (``--out``, ``--html``): ``-`` is refused, not standard output (which
    no command writes its output to) nor a file named ``-`` in the working directory (``./-`` names that)."""

    def convert(self, value, param, ctx):
        if value == "-":
            self.fail("'-' is not standard output here: this command writes a file (./- names a file called -)",
                      param, ctx)
        return super().convert(value, param, ctx)


class NameOrPath(click.ParamType):
    """``--model`` and ``--candidates``: a name ('ndrm3-scifact', 'bm25') or a path, whose leading ``~``
    is the home folder (:func:`home_expanded`; no name starts with ``~``)."""

    name = "name|path"

    def convert(self, value, param, ctx):
        return home_expanded(value)


DEFAULT_INDEX = "ckqti-index"  # the index of `ckqti index corpus.tsv` and `ckqti search QUERY`, in the current folder
INDEX_ENV = "CKQTI_INDEX"  # names another default


def default_index() -> str:
    """The index directory a command uses when none is named: ``$CKQTI_INDEX``, else ``./ckqti-index``."""
    return home_expanded(os.environ.get(INDEX_ENV) or DEFAULT_INDEX)


def index_or_default(value):
    """``--index``, else :func:`default_index`; a default with no index (nor a build of one) there is named as the
    default, with how to make one, rather than as a directory the user never typed."""
    if value is not None:
        return value
    path = default_index()
    if not os.path.exists(path) and not os.path.exists(path + ".partial"):
        raise click.ClickException(visible(
            f"{path}: no such index directory (the default index: build it with `ckqti index CORPUS`, "
            f"or name one with --index or ${INDEX_ENV})"))
    return path


INDEX_HELP = f"Index directory (default: ${INDEX_ENV}, else ./{DEFAULT_INDEX})."


class DefaultIndexOption(click.Option):
    """``--index`` of a command that falls back on :func:`default_index`, which :class:`Command` resolves once
    every parameter is parsed (as a callback, a missing default index was said before a missing ``--queries``,
    as an input error, exit 1, rather than click's usage error)."""


def index_option(f):
    return click.option("--index", "index_path", cls=DefaultIndexOption, default=None, type=PathArg(),
                        help=INDEX_HELP)(f)


def mode_options(f):
    f = click.option("--model", default=None, type=NameOrPath(), help="Refuse an index not built with this model ('ndrm2', 'ndrm2-anserini', 'ndrm3-scifact' or a checkpoint).")(f)
    f = click.option("--slack", default=1.0, show_default=True, type=Float(0, 1, min_open=True),
                     help="Anytime mode: factor (0, 1] on the pruning bound; below 1 prunes sooner, approximately.")(f)
    f = click.option("--budget", type=POSITIVE, default=200_000, show_default=True, help="Anytime mode: postings per shard.")(f)
    return click.option(
        "--mode", type=click.Choice(["exact", "anytime"]), default="exact", show_default=True, help="Traversal."
    )(f)


def corpus_orcas_option(note: str = "."):
    """``--orcas`` of a command that reads documents from ``--corpus`` (train, rerank, explain); ``note``
    ends its help."""
    return click.option("--orcas", type=PathArg(), default=None,
                        help="docid<TAB>query clicked queries, a leading field of --corpus's text as `index --orcas` "
                             "reads them" + note)


def check_anytime_options(mode: str, slack: float) -> None:
    """``--budget`` or a ``--slack`` below 1 with exact mode, which reads neither: a usage error before any
    work (the search would have run exact without the limit asked for, or failed later with exit 1)."""
    if mode == "anytime":
        return
    if click.get_current_context().get_parameter_source("budget") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--budget applies to --mode anytime only (exact mode reads every posting it needs)")
    if slack < 1:
        raise click.UsageError("--slack below 1 applies to --mode anytime only (exact mode never drops a document it could rank)")


def check_format_needs_corpus(fmt: str | None, corpus) -> None:
    """``--format`` names the format of ``--corpus``: without one (an index's or a run's documents) it would
    be ignored, so it is a usage error, as ``--budget`` without anytime mode."""
    if fmt is not None and corpus is None:
        raise click.UsageError("--format is the format of --corpus; without --corpus it applies to nothing")


def parse_channel_weights(ctx, param, values) -> dict[str, float] | None:
    from indexer.readers.formats import is_decimal

    weights = {}
    for v in values:
        name, sep, w = v.partition("=")
        if not sep or not name or not is_decimal(w):  # float() also reads "1_0" as 10, " 1" and other scripts' digits
            raise click.BadParameter(f"{v!r}: expected NAME=WEIGHT, e.g. one=0.5")
        weights[name] = float(w)
        if sum(other.partition("=")[0] == name for other in values) > 1:
            raise click.BadParameter(f"channel {name!r} is weighted twice")
        check_channel_weight(name, weights[name])
    return weights or None


def check_channel_weight(name: str, w: float) -> None:
    """The searcher's checks of one weight (:func:`retriever.query.channel_weight_problem`), made as the option
    is parsed: a weight out of range is a usage error, said before the index opens, as ``--slack 0`` is."""
    from retriever.query import channel_weight_problem

    if problem := channel_weight_problem(name, w):
        raise click.BadParameter(problem)


def channel_option(f):
    return click.option("--channel-weight", "channel_weights", multiple=True, callback=parse_channel_weights,
                        metavar="NAME=W", help="Multiply the index channel NAME ('one', 'idf'; `ckqti info` lists an index's) "
                        "by W, a number >= 0 (0, or 1e-6 to 1e6), at query time (0: the channel is not read, e.g. one=0 ranks by NDRM3's "
                        "explicit channel alone; not every channel 0); a channel not named keeps 1; repeatable "
                        "(e.g. one=0.5: NDRM3's latent channel at half weight, see scripts/channel_sweep.py).")(f)


@click.group(cls=Group, context_settings={"max_content_width": 120, "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckqti")  # a source tree on the path without an install: 0+unknown
def cli() -> None:
    """Full-retrieval neural search with a learned impact index."""


@cli.command("index", short_help="Build an index of CORPUS, or --append it to one.")
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
def index_cmd(corpus, out, append_to, index_path, model, fmt, orcas, shard_size, batch_size, device, force, no_resume,
              ray_address, workers, neighbours):
    """Build an index of CORPUS (TSV, JSONL, TREC or SMART; plain or gzip), or with --append add it to one."""
    check_index_options(append_to, out, index_path, ray_address, workers, neighbours, force, no_resume)
    if append_to:
        index_path = index_or_default(index_path)
        m = api.append(corpus, index_path, model, fmt, orcas, shard_size, batch_size, device)
        echo(f"appended {counted(m.appends[-1]['num_docs'], 'document')}: {counted(m.num_docs, 'document')}, "
             f"{counted(m.num_postings, 'posting')}, {len(m.shards)} shard(s) in {index_path}"
             + (clicked_note(m.appends[-1]["corpus"].get("orcas_documents")) if orcas else ""))
        if orcas:
            repeated_note(m.appends[-1]["corpus"].get("orcas_repeated"), orcas)
        if clipped := m.appends[-1].get("clipped_impacts"):
            echo(f"note: {counted(clipped, 'impact')} of the new documents exceeded the build's largest: stored "
                 "as 255 (`ckqti info` counts clipped impacts; rebuild if many: docs/INDEX.md)", err=True)
        truncated_note(m.appends[-1].get("truncated_documents"), m)
        return
    out = default_index() if out is None else out
    m = api.index(corpus, out, model, fmt, orcas, shard_size, force=force, resume=not no_resume, device=device,
                  ray_address=ray_address, workers=workers, neighbours=neighbours,
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
        cap = manifest.build.get("impact_config", {}).get("max_doc_terms")
        echo(f"note: {counted(documents, 'document')} longer than the model reads ({cap:,} terms, with any ORCAS "
             "field): terms past that are not indexed for them", err=True)


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


def repeated_note(repeated: int | None, orcas) -> None:
    """Say how many lines of the ORCAS file repeated a query their document already held (dropped:
    a click counts once, :func:`indexer.readers.load_orcas`)."""
    from indexer.readers import repeated_clicks_note

    if note := repeated_clicks_note(repeated or 0, orcas):
        echo(f"note: {note}", err=True)


@cli.command("compact", short_help="Merge an index's shards into fewer (exact results unchanged).")
@index_option
@click.option("--shard-size", type=POSITIVE, default=100_000, show_default=True, help="Documents per merged shard at most.")
def compact_cmd(index_path, shard_size):
    """Merge an index's consecutive shards into fewer (no rescoring; exact results are unchanged)."""
    m = api.compact(index_path, shard_size)
    echo(f"{len(m.shards)} shard(s), {counted(m.num_docs, 'document')} in {index_path}")


@cli.command("info", short_help="What an index holds: documents, postings, model, size.")
@index_option
@click.option("--verify", is_flag=True, help="Also hash every file and check its checksum (search does too, but skips files unchanged since their last check).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
def info_cmd(index_path, verify, as_json):
    """What an index holds: documents, postings, shards, model, analyzer, channels, bytes on disk."""
    info = api.info(index_path, verify)
    if as_json:
        click.echo(json.dumps(info.to_dict()))
        return
    for line in info_lines(info):
        echo(line)


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def info_lines(info) -> list[str]:
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
        lines.append(appended_clicks_line(info.appended_orcas, info.orcas is not None, info.clicked_documents))
    if info.clipped_impacts:
        lines.append(clipped_line(info.clipped_impacts, info.appended_clipped_impacts))
    if info.unfinished:
        lines.append(f"unfinished  {info.unfinished} " + (f"(a build in progress, process {info.building})" if info.building
                     else "(an interrupted build; the same ckqti index command resumes it)"))
    if info.leftovers:
        lines.append(leftovers_line(info.leftovers, size["leftovers"], info.writing))
    lines.append("checksums   " + ("verified" if info.verified else "not checked (--verify)"))
    return lines


def appended_clicks_line(appended: list[dict], at_build: bool, total: int | None) -> str:
    """The ORCAS files appends joined (``index --append --orcas``), each with its appends and the
    documents it reached; with the build's clicks too, the documents with clicks in all."""
    files: dict[str, tuple[list[int], int | None]] = {}
    for a in appended:
        numbers, documents = files.get(a["orcas"], ([], 0))
        files[a["orcas"]] = (numbers + [a["append"]],
                             None if documents is None or a["documents"] is None else documents + a["documents"])
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


@cli.command("search")
@click.argument("query", nargs=-1, required=True)
@index_option
@click.option("-k", type=POSITIVE, default=10, show_default=True, help="Results.")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
@mode_options
@channel_option
def search_cmd(query, index_path, k, as_json, mode, budget, slack, model, channel_weights):
    """Search an index with QUERY (its words quoted or not)."""
    check_anytime_options(mode, slack)
    from ckqti.text import non_ascii_readings
    from retriever.results import search_json

    query = decoded_argument(" ".join(query))  # bytes that are not UTF-8 would go into --json as lone surrogates
    # one query a process: exact mode scans it with numpy, which answers before Numba would have loaded its kernels
    searcher = api.open_searcher(index_path, mode, budget, model, channel_weights=channel_weights, slack=slack,
                                 engine="auto")
    with note_if_slow(SLOW_SEARCH_AFTER, compiling_note, lambda: api.kernels_compiling()):
        res = searcher.search(query, k)
    if readings := non_ascii_readings(query, searcher.index.analyzer):
        shown = "; ".join(f"{w} as {' '.join(terms) or 'nothing'}" for w, terms in readings)
        echo(f"note: the analyzer reads ASCII letters and digits only: {shown}", err=True)
    if res.oov:
        echo(f"note: not in the index vocabulary, skipped: {' '.join(res.oov)}", err=True)
    if res.unweighted:
        echo(unweighted_note(searcher, res.unweighted), err=True)
    if unstored := searcher.unstored([t for t in res.terms if t not in res.unweighted]):
        cap = searcher.index.manifest.build.get("impact_config", {}).get("max_doc_terms")
        past = f" (a term only past a document's first {cap:,} terms, all the model reads, is not indexed)" if cap else ""
        echo(f"note: in the vocabulary but in no document's postings: {' '.join(unstored)}{past}", err=True)
    if as_json:
        click.echo(json.dumps(search_json(searcher, res)))
        return
    for line in search_lines(searcher, res):
        echo(line)


SLOW_SEARCH_AFTER = 3.0  # seconds
NOTE_POLL = 0.25  # seconds between looks at whether a slow search has begun compiling its kernels
SLOW_SEARCH_NOTE = ("note: still searching: compiling the search kernels, as the first search of its kind after installing ckqti "
                    "does (10-20 s on 2 cores; Numba keeps them for later searches in $NUMBA_CACHE_DIR, beside ckqti's modules or in "
                    "~/.cache/numba, the first it can write)")
SLOW_RUN_NOTE = ("note: compiling the batch search kernels, as the first run of its kind after installing ckqti does "
                 "(10-20 s on 2 cores; Numba keeps them for later runs in $NUMBA_CACHE_DIR, beside ckqti's modules or in "
                 "~/.cache/numba, the first it can write)")
NOWHERE = ("Numba can keep them nowhere (it can write neither beside ckqti's modules nor in ~/.cache/numba): set "
           "NUMBA_CACHE_DIR to a writable folder")
UNCACHED_SEARCH_NOTE = ("note: still searching: compiling the search kernels (10-20 s on 2 cores), as every search of its kind "
                        "here does: " + NOWHERE)
UNCACHED_RUN_NOTE = "note: compiling the batch search kernels (10-20 s on 2 cores), as every run here does: " + NOWHERE


def compiling_note(batch: bool = False) -> str:
    """The note for a search (``batch``: a run) that compiles its kernels: where Numba keeps them for
    later processes or, from a read-only install beside a home without a writable ~/.cache, that it
    keeps them nowhere (the cached-for-later note misled there: every process compiles them again)."""
    if api.kernels_cached(batch):
        return SLOW_RUN_NOTE if batch else SLOW_SEARCH_NOTE
    return UNCACHED_RUN_NOTE if batch else UNCACHED_SEARCH_NOTE


@contextlib.contextmanager
def note_if_slow(seconds: float, text, compiling):
    """Print ``text`` (or what ``text()`` gives then) on stderr once the block has run ``seconds`` and
    ``compiling()`` says the kernels are being compiled, looked at every :data:`NOTE_POLL` s from then on (a first search
    compiles Numba kernels for 10-20 s in silence, which looks like a hang; a run may read its index
    and queries for longer than ``seconds`` before that; a slow block that compiles nothing is no news)."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        while not compiling():
            if done.wait(NOTE_POLL):
                return
        echo(text() if callable(text) else text, err=True)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()  # its note, if any, comes before what follows the block


def count_queries(n: int) -> str:
    return counted(n, "query", "queries")


def skipped_reasons(skipped, reasons: dict[str, str], shown: int = 3) -> str:
    """The first ``shown`` skipped queries with their reasons, for a one-line note."""
    return "; ".join(f"{q}: {reasons.get(q, '?')}" for q in skipped[:shown]) + ("; ..." if len(skipped) > shown else "")


def unweighted_note(searcher, terms: list[str]) -> str:
    """Why known query terms add nothing: an idf of 0 (NDRM2's ``max(log((N - df + 0.5) /
    (df + 0.5)), 0)``) where every channel is idf-weighted, else a weight too small to count."""
    index = searcher.index
    idf_only = all(w == "idf" for w in index.quantizer.weights)
    if idf_only and all(index.idf[index.term_ids[t]] <= 0 for t in terms):
        why = "idf 0: each is in at least half of the documents"
    else:
        why = "their weight rounds to 0 beside the other terms' or their channel is weighted 0"
    return f"note: adds nothing to any score, skipped: {' '.join(terms)} ({why})"


def search_lines(searcher, res) -> list[str]:
    from retriever.snippets import clip, snippet

    if not res.hits:
        return ["no documents match"]
    lines = []
    score_width = max(9, *(len(f"{h.score:.4f}") for h in res.hits))  # 10,000 or more: wider, the same for every row
    for h in res.hits:
        doc = searcher.document(h)
        # mojibake repaired in what is shown only (a whole long document costs ftfy ~0.7 ms a KB); the
        # analyzer that marks query terms reads ASCII alone, which the repair leaves where it was
        text = repaired(snippet(doc["text"], set(res.terms), searcher.index.analyzer, mark=("[", "]"),  # query terms marked
                                columns=SNIPPET_COLUMNS))
        title = repaired(clip(" ".join(doc["title"].split()), SNIPPET_COLUMNS))  # a title's line breaks would break the columns
        docid = visible(h.docid)  # as echo prints it, padded to 14 columns (a CJK character takes two)
        head = f"{h.rank:>3}  {docid}{' ' * (14 - columns_of(docid))} {h.score:{score_width}.4f}  "
        lines.append(head + (title or text))
        if title:
            lines.append(" " * columns_of(head) + text)
    return lines


@cli.command("run")
@index_option
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@click.option("--out", required=True, type=OutPath(),
              help="TREC run file to write (an existing file is replaced only if it is a run, or empty).")
@click.option("-k", type=POSITIVE, default=1000, show_default=True, help="Documents per query.")
@click.option("--threads", type=POSITIVE, default=1, show_default=True, help="Search threads.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Queries format (default: from the file).")
@click.option("--tag", default="ckqti", show_default=True, help="Run tag, the last column (no whitespace).")
@mode_options
@channel_option
def run_cmd(index_path, queries, out, k, threads, fmt, tag, mode, budget, slack, model, channel_weights):
    """Batch fullrank: search every query and write a TREC run."""
    check_anytime_options(mode, slack)
    with note_if_slow(SLOW_SEARCH_AFTER, lambda: compiling_note(batch=True), lambda: api.kernels_compiling(batch=True)):
        s = api.run(index_path, queries, out, k, threads, mode, budget, fmt, tag, model, channel_weights, slack)
    if s.skipped:
        echo(f"note: {count_queries(len(s.skipped))} skipped ({skipped_reasons(s.skipped, s.reasons)})", err=True)
    if s.empty:
        why = "; ".join(f"{q}: {r}" for q, r in list(s.empty.items())[:3]) + ("; ..." if len(s.empty) > 3 else "")
        echo(f"note: {count_queries(len(s.empty))} retrieved nothing ({why})", err=True)
    if not s.documents:
        echo("note: no query retrieved a document; the run file is empty", err=True)
    rate = f"{s.qps:,.0f}" if s.qps >= 10 else f"{s.qps:.2g}"  # a first run's compiling: "0.083 q/s", not "0 q/s"
    echo(f"{s.searched} of {count_queries(s.searched + len(s.skipped))} searched in {s.seconds:.2f}s ({rate} q/s) -> {out}"
         if s.skipped else f"{count_queries(s.searched)} in {s.seconds:.2f}s ({rate} q/s) -> {out}")


@cli.command("eval", short_help="Evaluate a TREC run against judgements; compare runs.")
@click.argument("run", type=PathArg())
@click.argument("qrels", type=PathArg())
@click.option("--per-query", is_flag=True, help="Also print every query's measures.")
@click.option("--compare", type=PathArg(), multiple=True,
              help="Another run: its delta against RUN, paired t-test and Wilcoxon signed-rank test; repeatable "
                   "(each run against RUN).")
@qrels_format_option
@rel_level_option("for RR, AP, P and R; nDCG and NCG keep every grade's gain")
@click.option("--measures", default=None, metavar="M1,M2,...",
              help="Comma-separated measures to report: nDCG, RR (MRR), AP (MAP), NCG, P or R, optionally @k "
                   "[default: nDCG@10,RR@10,AP@100,NCG@100,P@10,R@100].")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object for programs: measures, means, queries without results or judgements, tests (with "
                   "--compare), per-query values (with --per-query).")
@click.option("--markdown", is_flag=True, help="Markdown tables.")
def eval_cmd(run, qrels, per_query, compare, qrels_format, rel_level, measures, as_json, markdown):
    """Evaluate a TREC RUN against QRELS: nDCG@10, RR@10, AP@100, NCG@100, P@10, R@100 (with --compare,
    paired t-test and Wilcoxon signed-rank test)."""
    if as_json and markdown:
        raise click.UsageError("--json and --markdown do not combine")
    chosen = None if measures is None else [m.strip() for m in measures.split(",") if m.strip()]
    report = api.evaluate(run, qrels, per_query, list(compare) or None, qrels_format, rel_level, chosen)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
        return
    echo(report.table(markdown))


@cli.command("train", short_help="Train a model on judged queries and BM25 candidates.")
@click.option("--model", "variant", type=click.Choice(["ndrm1", "ndrm2", "ndrm3", "tk", "tkl", "idcm"]), default="ndrm3",
              show_default=True, help="Kind of model to train (other commands' --model takes the checkpoint it writes).")
@click.option("--corpus", required=True, type=PathArg(), help="Corpus file (TSV, JSONL, TREC, SMART).")
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@click.option("--qrels", required=True, type=PathArg(), help="Training judgements.")
@click.option("--out", required=True, type=OutPath(), help="Checkpoint to write (best dev epoch).")
@click.option("--dev-qrels", type=PathArg(), default=None,
              help="NDRM: dev judgements (else carved from --qrels, as TK, TKL and IDCM always do).")
@click.option("--dev-fraction", type=Float(0, 1, min_open=True, max_open=True), default=0.1, show_default=True, help="Share of training queries held out as dev.")
@click.option("--epochs", type=POSITIVE, default=10, show_default=True,
              help="Passes over the training queries at most (IDCM: in stages 1 and 2 each); --patience may stop sooner.")
@click.option("--patience", type=POSITIVE, default=3, show_default=True, help="Epochs without a better dev nDCG@10 before stopping.")
@click.option("--max-steps", type=POSITIVE, default=None,
              help="Optimizer steps per epoch at most, for a quick trial of a set-up (default: every training query).")
@click.option("--batch-size", type=POSITIVE, default=32, show_default=True,
              help="Queries per step (NDRM: the relevant, --negatives BM25 and 2 random documents each; "
                   "TK/TKL/IDCM: a triple each, or with --loss lce the relevant and --negatives).")
@click.option("--lr", type=Float(0, min_open=True), default=None,
              help="NDRM learning rate [default: 1e-4] (TK/TKL/IDCM train with the SPEC's two rates).")
@click.option("--seed", type=Integer(0, 2**32 - 1), default=0, show_default=True,
              help="Seeds the dev split, sampling, initial weights, dropout and skip-gram.")
@device_option
@click.option("--weak-supervision", type=click.Choice(["titles"]), default=None, help="Documents' titles as pseudo-queries for their own documents (NDRM, TK, TKL).")
@click.option("--embeddings", type=EmbeddingStart(), default=None,
              help="Initial word vectors (NDRM, TK, TKL): skipgram, minilm, random, or a checkpoint file whose word "
                   "vectors of the same width start the model [default: skipgram].")
@click.option("--init", "init", type=click.Choice(["paper", "match"]), default=None,
              help="Initial weights (NDRM, TK, TKL) [default: paper for NDRM, match for TK/TKL].")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@corpus_orcas_option(" (BM25 candidates still search the plain corpus).")
@qrels_format_option
@rel_level_option("the positives training samples, and the queries that may be held out as dev")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run from its last finished epoch, saved in <out>.work (state.pt; IDCM: "
                   "stage<N>.state.pt; same settings and data, epochs and patience may change). IDCM reuses its "
                   "finished stages in <out>.work by itself when settings and data match.")
@click.option("--loss", type=click.Choice(["margin", "ranknet", "lce"]), default=None,
              help="Pairwise margin (TK/TKL/IDCM's default), RankNet (NDRM's default), or listwise (lce: the relevant "
                   "document's softmax cross-entropy against the query's other documents).")
@click.option("--negatives", type=Integer(1), default=1, show_default=True,
              help="BM25 negatives per query and step (TK/TKL/IDCM: with --loss lce; NDRM: in each example, next to "
                   "the relevant and 2 random documents; 1 is the published sampling).")
@click.option("--term-weights", type=click.Choice(["none", "idf"]), default="none", show_default=True,
              help="TK/TKL: weigh each query term by its idf in the collection read (none: the papers' sum).")
@click.option("--tail-windows", type=click.Choice(["partial", "whole"]), default=None,
              help="TKL: keep the saturation windows that run past a document's end (partial, the reference's) or drop "
                   "them (whole: no one-token region at a document's end) [default: partial].")
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="TKL/IDCM: document tokens the model reads in training, kept in its checkpoint for rerank and "
                   "explain [default: 2,000] (TK's cap is the SPEC's 200, NDRM's 4,000 terms).")
@click.option("--explicit", is_flag=True,
              help="TK/TKL: combine the score with NDRM2's explicit (BM25-like) term matching, as NDRM3 combines its "
                   "channels; the model starts as NDRM2 alone.")
@click.option("--teacher", type=PathArg(dir_okay=False), default=None,
              help="NDRM/TK/TKL: a teacher's scores ({'scores': {qid: {docid: score}}}, .json or .json.gz) to distil "
                   "listwise beside the ranking loss (training queries only).")
@click.option("--distill-docs", type=Integer(1), default=8, show_default=True,
              help="With --teacher: teacher-scored documents per query and step.")
@click.option("--distill-weight", type=Float(0), default=1.0, show_default=True,
              help="With --teacher: weight of the distillation loss.")
@click.option("--latent-gate", type=Float(0, 1, min_open=True), default=None,
              help="NDRM1/NDRM3: score a term's latent channel only where it occurs in the document or its cosine "
                   "with a document vector reaches this threshold (0 elsewhere), so that the learned index is exact.")
@click.option("--fixed-bm25", is_flag=True,
              help="NDRM2/NDRM3: the explicit channel is BM25 with Anserini's k1 0.9, b 0.4 and stays so (its two "
                   "parameters and statistics are not trained; on any collection it reads that collection's avgdl).")
@click.option("--frozen-embeddings", is_flag=True,
              help="NDRM1/NDRM3/TK/TKL: keep the initial word vectors (e.g. --embeddings minilm) as they are; the "
                   "rest of the model trains.")
@click.option("--selector-loss", type=click.Choice(["lambda", "mse", "kl"]), default=None,
              help="IDCM: stage 3's loss distilling the window selector from the cross-encoder: LambdaLoss over its "
                   "top windows (the paper's), or the MSE / KL alternatives [default: lambda].")
def train_cmd(variant, corpus, queries, qrels, out, dev_qrels, dev_fraction, epochs, patience, max_steps, batch_size, lr, seed,
              device, weak_supervision, embeddings, init, fmt, orcas, qrels_format, rel_level, resume, loss, negatives,
              term_weights, teacher, distill_docs, distill_weight, latent_gate, tail_windows, max_doc_length, explicit,
              fixed_bm25, frozen_embeddings, selector_loss):
    """Train a model on BM25 candidates (NDRM: RankNet or listwise; TK/TKL/IDCM: pairwise or listwise); writes the best dev epoch to --out."""
    try:
        r = api.train(variant, corpus, queries, qrels, out, dev_qrels=dev_qrels, fmt=fmt, qrels_format=qrels_format,
                      resume=resume, orcas=orcas, epochs=epochs, patience=patience, max_steps=max_steps,
                      batch_size=batch_size, lr=lr, seed=seed,
                      dev_fraction=dev_fraction, rel_level=rel_level, device=device,
                      weak_supervision=weak_supervision, embeddings=embeddings, init=init, loss=loss,
                      negatives=negatives, term_weights=term_weights, tail_windows=tail_windows,
                      max_doc_length=max_doc_length, explicit=explicit, teacher=teacher,
                      distill_docs=distill_docs, distill_weight=distill_weight, latent_gate=latent_gate,
                      fixed_bm25=fixed_bm25, frozen_embeddings=frozen_embeddings, selector_loss=selector_loss)
    except OptionError as e:  # raised in the command, not the group: click adds train's usage line
        raise click.UsageError(e.as_flags()) from None
    stage = f" of stage {r.history[-1]['stage']}" if variant == "idcm" else ""
    if r.best_dev_ndcg10 == 0:
        echo("note: dev nDCG@10 was 0 at every epoch (the dev queries' relevant documents were never ranked in "
             "the top 10): dev did not choose this model", err=True)
    start = " (the model before training: no epoch beat it)" if r.best_epoch == 0 else ""
    echo(f"{r.model_id}: best dev nDCG@10 {r.best_dev_ndcg10:.4f} at epoch {r.best_epoch} of {r.epochs_run}{stage}{start} "
         f"-> {out}")


@cli.command("rerank", short_help="Rerank each query's top candidates with a model.")
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@click.option("--candidates", required=True, type=NameOrPath(), help="'bm25' (needs --corpus), an index directory, or a TREC run file.")
@click.option("--model", "model_path", required=True, type=NameOrPath(),
              help="Checkpoint (TK, TKL, IDCM or NDRM), 'ndrm3-scifact' (the bundled NDRM3), or 'ndrm2' / "
                   "'ndrm2-anserini' (untrained, on the collection's statistics: --corpus's, else the index of --candidates).")
@click.option("--out", required=True, type=OutPath(),
              help="TREC run file to write (BM25's Lucene index is kept in OUT.work for later runs on the same corpus).")
@click.option("--depth", type=POSITIVE, default=100, show_default=True, help="Candidates reranked per query.")
@click.option("--corpus", type=PathArg(), default=None, help="Corpus for BM25 and document text.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@click.option("--batch-size", type=POSITIVE, default=32, show_default=True, help="Documents scored at once.")
@device_option
@click.option("--tag", default=None, help="Run tag, no whitespace (default: ckqti-<kind>).")
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="Document tokens read (TKL, IDCM and NDRM; default: the length the checkpoint was trained "
                   "with, saved in it; the untrained NDRM2's 4,000 terms).")
@click.option("--adapt-vocabulary", is_flag=True,
              help="Read text with the collection's vocabulary (zero-shot): --corpus's, else the --candidates index's.")
@corpus_orcas_option(" (BM25 candidates still search the plain corpus; an index's text holds its own).")
def rerank_cmd(queries, candidates, model_path, out, depth, corpus, fmt, batch_size, device, tag, max_doc_length,
               adapt_vocabulary, orcas):
    """Rerank each query's top --depth candidates with a model; writes a TREC run."""
    check_format_needs_corpus(fmt, corpus)
    s = api.rerank(queries, candidates, model_path, out, depth, corpus, fmt=fmt, batch_size=batch_size, device=device,
                   tag=tag, max_doc_length=max_doc_length, adapt_vocabulary=adapt_vocabulary, orcas=orcas,
                   progress=True)
    repeated_note(s.repeated_clicks, orcas)
    if s.skipped:
        echo(f"note: {count_queries(len(s.skipped))} skipped ({skipped_reasons(s.skipped, s.reasons)})", err=True)
    if s.unknown_words is not None and s.unknown_words >= UNKNOWN_WORDS_NOTE and not adapt_vocabulary:
        echo(f"note: the model read {s.unknown_words:.0%} of the candidates' words as unknown (trained on another "
             "collection?); --adapt-vocabulary reads them as `ckqti index` does", err=True)
    echo(f"{count_queries(s.reranked) if s.reranked == s.queries else f'{s.reranked} of {count_queries(s.queries)}'}, "
         f"{counted(s.pairs, 'document')} reranked by {s.model_id} in {s.seconds:.2f}s ({s.ms_per_query:.0f} ms/query) -> {out}")


@cli.command("explain", short_help="Why a model scores DOCID as it does for QUERY.")
@click.argument("query")
@click.argument("docid")
@click.option("--model", "model_path", default=None, type=NameOrPath(),
              help="Checkpoint of any kind, 'ndrm3-scifact' (the bundled NDRM3), or 'ndrm2' / 'ndrm2-anserini' "
                   "(untrained, on the collection's statistics); with --index, default: the index's model.")
@click.option("--corpus", type=PathArg(), default=None, help="Corpus file holding DOCID.")
@click.option("--index", "index_path", type=PathArg(), default=None,
              help="Or an index holding DOCID (an NDRM model then reads with the index's vocabulary: its score).")
@click.option("--html", "html_out", type=OutPath(), default=None, help="Also write a self-contained HTML page.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@click.option("--color/--no-color", default=None, help="ANSI colours (default: when stdout is a terminal and $NO_COLOR is unset or empty).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
@device_option
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="Document tokens read (TKL, IDCM and NDRM), as rerank's option: the score rerank gave with it.")
@click.option("--adapt-vocabulary", is_flag=True, help="Read text with the corpus's (or index's) vocabulary (zero-shot).")
@corpus_orcas_option()
def explain_cmd(query, docid, model_path, corpus, index_path, html_out, fmt, color, as_json, device, max_doc_length,
                adapt_vocabulary, orcas):
    """Why the model scores DOCID as it does for QUERY: regions, kernels or term contributions."""
    check_format_needs_corpus(fmt, corpus)
    if (corpus is None) == (index_path is None):
        raise click.UsageError("give exactly one of --corpus or --index: where to read DOCID from")
    query = decoded_argument(query)
    e = api.explain(query, docid, model_path, corpus, index_path, html_out, fmt=fmt, device=device,
                    max_doc_length=max_doc_length, adapt_vocabulary=adapt_vocabulary, orcas=orcas)
    repeated_note(e.repeated_clicks, orcas)
    if as_json:
        click.echo(json.dumps(e.to_dict()))
    else:
        click.echo(e.render_terminal(color), color=color)
    if html_out:  # on stderr: --json's stdout stays one object
        echo(f"wrote {html_out}", err=True)


@cli.command("serve")
@index_option
@click.option("--port", type=Integer(0, 65535), default=8000, show_default=True, help="TCP port (0: a free one, printed at start).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; loopback unless told otherwise.")
@click.option("--api-key-env", default=None, help="Name of an environment variable holding the API key (X-API-Key).")
@click.option("--threads", "--workers", "workers", type=POSITIVE, default=None,
              help="Search threads, as run's --threads (default: CPU count, at most 8).")
@click.option("--max-k", type=POSITIVE, default=1000, show_default=True, help="Largest k a request may ask for.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@mode_options
@channel_option
def serve_cmd(index_path, port, host, api_key_env, workers, max_k, access_log, mode, budget, slack, model,
              channel_weights):
    """Serve an HTTP JSON search API over one index (docs/SERVE.md)."""
    check_anytime_options(mode, slack)
    import os

    from retriever.service import is_loopback

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key or not api_key.strip():
            raise click.ClickException(f"--api-key-env: environment variable {api_key_env} is not set or empty")
        if api_key != api_key.strip():  # HTTP drops a header value's surrounding blanks: no request could match
            raise click.ClickException(f"--api-key-env: the key in {api_key_env} starts or ends with whitespace, "
                                       "which an X-API-Key header cannot carry")

    def ready(url: str) -> None:  # bound: a failure to open the index or to listen is said alone, without the warning
        if not is_loopback(host):
            guard = "API key required" if api_key else "NO API key: anyone who can reach it can use it"
            echo(f"warning: binding {host}, not loopback: the index is reachable from the network ({guard})", err=True)
        echo(f"serving {index_path} at {url} (Ctrl-C to stop)")

    api.serve(index_path, host, port, api_key, mode, budget, model, workers, max_k, access_log, on_ready=ready,
              slack=slack, channel_weights=channel_weights)


def main() -> None:
    with escaped_output():
        _main()


def _main() -> None:
    try:
        cli(prog_name="ckqti")
    finally:  # the command is over: a Ctrl-C while Python shuts down ends the process at once, not with a
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # KeyboardInterrupt inside some finalizer's traceback


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
