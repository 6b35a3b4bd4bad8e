"""``ckqti`` command line: each command parses options and calls one function of :mod:`ckqti.api`.

The entry point is here, importing the rest only when called, so that a Ctrl-C while those imports run (the first
~0.1 s of a command) ends it as one during the command does; :mod:`ckqti.cli.commands` is the group,
:mod:`ckqti.cli.options` holds the shared option types, :mod:`ckqti.cli.notes` what several commands print,
:mod:`ckqti.cli.base` the command and group classes (usage errors, one-line failures), and one module per command
family defines its commands.
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    try:
        from ckqti.cli.commands import cli
        from ckqti.terminal import escaped_output
    except KeyboardInterrupt:  # before click is there to print it: as Group.invoke says a Ctrl-C during the command
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    try:
        with escaped_output():
            cli(prog_name="ckqti")
    finally:  # the command is over: a Ctrl-C while Python shuts down ends the process at once, not with a
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # KeyboardInterrupt inside some finalizer's traceback


def __getattr__(name: str):
    """``ckqti.cli.cli``, the click group (:mod:`ckqti.cli.commands`), imported when first asked for."""
    if name == "cli":
        from ckqti.cli.commands import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
