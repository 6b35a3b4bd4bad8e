"""``ckqti`` command line: each command parses options and calls one function of :mod:`ckqti.api`.

The group and its entry point are here; :mod:`ckqti.cli.options` holds the shared option types,
:mod:`ckqti.cli.notes` what several commands print, :mod:`ckqti.cli.base` the command and group classes
(usage errors, one-line failures), and one module per command family defines its commands.
"""

from __future__ import annotations

import signal

import click

from ckqti import __version__
from ckqti.cli.base import Group
from ckqti.cli.evaluate import eval_cmd
from ckqti.cli.explain import explain_cmd
from ckqti.cli.index import compact_cmd, index_cmd, info_cmd
from ckqti.cli.rerank import rerank_cmd
from ckqti.cli.search import run_cmd, search_cmd
from ckqti.cli.serve import serve_cmd
from ckqti.cli.train import train_cmd
from ckqti.terminal import escaped_output


@click.group(cls=Group, context_settings={"max_content_width": 120, "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckqti")  # a source tree on the path without an install: 0+unknown
def cli() -> None:
    """Full-retrieval neural search with a learned impact index."""


for _command in (index_cmd, compact_cmd, info_cmd, search_cmd, run_cmd, eval_cmd, train_cmd, rerank_cmd, explain_cmd,
                 serve_cmd):
    cli.add_command(_command)


def main() -> None:
    with escaped_output():
        _main()


def _main() -> None:
    try:
        cli(prog_name="ckqti")
    finally:  # the command is over: a Ctrl-C while Python shuts down ends the process at once, not with a
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # KeyboardInterrupt inside some finalizer's traceback
