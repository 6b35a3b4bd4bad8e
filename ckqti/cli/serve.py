"""``ckqti serve``: an HTTP JSON search API over one index."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import echo
from ckqti.cli.options import POSITIVE, Integer, channel_option, check_anytime_options, index_option, mode_options


@command("serve")
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
    from retriever.service import environment_api_key, is_loopback

    api_key = None if api_key_env is None else environment_api_key(api_key_env)

    def ready(url: str) -> None:  # bound: a failure to open the index or to listen is said alone, without the warning
        if not is_loopback(host):
            guard = "API key required" if api_key else "NO API key: anyone who can reach it can use it"
            echo(f"warning: binding {host}, not loopback: the index is reachable from the network ({guard})", err=True)
        echo(f"serving {index_path} at {url} (Ctrl-C to stop)")

    api.serve(index_path, host, port, api_key, mode, budget, model, workers, max_k, access_log, on_ready=ready,
              slack=slack, channel_weights=channel_weights)
