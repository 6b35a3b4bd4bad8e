"""The ckqti Command and Group: usage errors with the command's usage line, stray arguments, one-line failures."""

from __future__ import annotations

import os
import sys

import click

from ckqti.cli.notes import echo
from ckqti.cli.options import DefaultIndexOption, index_or_default
from ckqti.errors import CkqtiError, OptionError
from ckqti.terminal import visible


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


def close_progress_bars() -> None:
    """Close the progress bars a failed command left open, so that its error starts a line of its own."""
    from tqdm.auto import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def command(name: str, **kwargs):
    """``click.command`` of a ckqti command, a :class:`Command` (as the group's own ``cli.command`` would make it);
    ``ckqti.cli`` adds it to the group."""
    return click.command(name, cls=Command, **kwargs)
