"""Shared click types and options of the ckqti commands: ranges, paths, the default index, anytime and channel options,
``-q/--quiet``."""

from __future__ import annotations

import os

import click

from ckqti.terminal import visible


class Integer(click.IntRange):
    """An integer option within a range: shown as ``INTEGER`` with its range after the help (``[x>=1]``),
    and a value that is no integer is "not a valid integer", as click says of a plain ``int``."""

    name = "integer"


class Float(click.FloatRange):
    """A number option within a range: shown as ``FLOAT`` with its range after the help, as :class:`Integer`."""

    name = "float"


POSITIVE = Integer(min=1)  # counts: results, shard and batch sizes, threads, epochs


def home_expanded(value):
    """A path's leading ``~`` or ``~user`` as the home folder, as the shell would have it where it
    leaves it alone (``--out=~/idx``, a quoted ``"~/idx"``); anything else as it is."""
    return os.path.expanduser(value) if isinstance(value, str) and value.startswith("~") else value


def qrels_format_option(f):
    """``--qrels-format`` of every command reading judgements (eval, train)."""
    return click.option("--qrels-format", type=click.Choice(["trec", "beir", "cranfield"]), default=None,
                        help="trec: qid iter docid grade; beir: query-id corpus-id grade; cranfield: qid docid code "
                             "(1 best .. 4, -1 not relevant). Default: from the first line (ambiguous 3-column files "
                             "ask).")(f)


def queries_format_option(f):
    """``--queries-format`` of every command reading a queries file (run, rerank, train); ``--format`` is the
    corpus's in every command that reads one (run's hidden ``--format`` is its old name: :func:`queries_format_of`)."""
    return click.option("--queries-format", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
                        help="Queries format (default: from the file).")(f)


def queries_format_of(old: str | None, new: str | None) -> str | None:
    """The queries format of run's old ``--format`` (hidden, kept for scripts) and ``--queries-format``: either,
    or both when they agree; two formats are a usage error."""
    if old is not None and new is not None and old != new:
        raise click.UsageError(f"--format is the old name of --queries-format: give one (here {old} and {new})")
    return new if new is not None else old


def device_option(f):
    """``--device`` of every command that runs a model (index, train, rerank, explain)."""
    return click.option("--device", default=None, metavar="DEVICE",
                        help="torch device, e.g. cpu or cuda:1 (default: cuda if available).")(f)


def rel_level_option(decides: str):
    """``--rel-level`` of a command that decides which judged documents are relevant (eval, train); ``decides``:
    what the grade decides there, for its help."""
    return click.option("--rel-level", type=POSITIVE, default=1, show_default=True,
                        help=f"Grade from which a judged document counts relevant: {decides} (TREC DL passages: 2).")


QUIET = "ckqti.quiet"  # the key of -q/--quiet in the click context's meta (shared by the group and its command)


def quiet_option(f):
    """``-q/--quiet`` of every command that says more than its results and errors on stderr (index, run, rerank, train,
    search, explain): not a parameter of the command, but a flag in the click context that :func:`quiet` reads, for
    :func:`ckqti.cli.notes.note` and the API's ``progress`` flags the command passes."""
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=set_quiet,
                        help="Nothing on stderr but errors: no progress or notes (stdout unchanged).")(f)


def set_quiet(ctx: click.Context, param, value: bool) -> None:
    ctx.meta[QUIET] = value


def quiet() -> bool:
    """Whether the running command was given ``-q/--quiet`` (outside a command, or in a thread that has not
    entered the command's context: no)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and bool(ctx.meta.get(QUIET))


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
    """``--index`` of a command that falls back on :func:`default_index`, which :class:`~ckqti.cli.base.Command` resolves once
    every parameter is parsed (as a callback, a missing default index was said before a missing ``--queries``,
    as an input error, exit 1, rather than click's usage error)."""


def index_option(f):
    """``--index`` of the commands that read an index (default: ``$CKQTI_INDEX``, else ``./ckqti-index``)."""
    return click.option("--index", "index_path", cls=DefaultIndexOption, default=None, type=PathArg(),
                        help=INDEX_HELP)(f)


def mode_options(f):
    """``--mode``, ``--budget``, ``--slack`` and ``--model`` of the commands that search (search, run, serve)."""
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
    """``--channel-weight NAME=W`` options as ``{NAME: W}`` (None: none given), each checked as it is parsed."""
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
    """``--channel-weight NAME=W``, repeatable, of the commands that search."""
    return click.option("--channel-weight", "channel_weights", multiple=True, callback=parse_channel_weights,
                        metavar="NAME=W", help="Multiply the index channel NAME ('one', 'idf'; `ckqti info` lists an index's) "
                        "by W, a number >= 0 (0, or 1e-6 to 1e6), at query time (0: the channel is not read, e.g. one=0 ranks by NDRM3's "
                        "explicit channel alone; not every channel 0); a channel not named keeps 1; repeatable "
                        "(e.g. one=0.5: NDRM3's latent channel at half weight, see scripts/channel_sweep.py).")(f)
