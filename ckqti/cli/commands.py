"""The ``ckqti`` group and its commands, each in the module of its family; :func:`ckqti.cli.main` runs it."""

from __future__ import annotations

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


@click.group(cls=Group, context_settings={"max_content_width": 120, "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckqti")  # a source tree on the path without an install: 0+unknown
def cli() -> None:
    """Full-retrieval neural search with a learned impact index."""


for _command in (index_cmd, compact_cmd, info_cmd, search_cmd, run_cmd, eval_cmd, train_cmd, rerank_cmd, explain_cmd,
                 serve_cmd):
    cli.add_command(_command)
