"""The search service: an HTTP JSON API (FastAPI) over one opened :class:`Searcher`.

Endpoints (every error is a 4xx with ``{"detail": "<one-line message>"}``):

- ``GET /health``: the index's model id, document and shard counts, the search mode (with the
  anytime mode's ``budget`` and ``slack``; null in exact mode) and channel weights, and the
  request limits.
- ``POST /search`` ``{"query": str, "k": int}``: exactly the JSON of ``ckqti search --json``;
  ``GET /search?q=...&k=...`` the same.
- ``POST /search/batch`` ``{"queries": [str, ...], "k": int}``: ``{"results": [...]}``, one
  answer per query in order; a query with no searchable terms gets ``{"query", "error"}``.
- ``GET /documents/{docid}``: ``{"docid", "title", "text", "prefix"}`` from the index's document store.

``/openapi.json`` documents each answer with the models of :mod:`retriever.service_answers`, and a keyed
service's ``X-API-Key`` as an apiKey security scheme (:func:`document_api_key`).

The service answers from the index it was started with: no request names a file; a docid is
a key of an in-memory map, never a path. Searching is CPU-bound (Numba kernels compiled with
``nogil=True``, so they run in parallel), and runs on a thread pool of ``workers`` threads
owned by the app: each thread keeps one scratch workspace sized for the largest shard, so
the pool size bounds that memory as well as the CPU used.

This module must not use ``from __future__ import annotations``: the request models are
built per app (their limits are the app's), and FastAPI resolves the endpoints'
annotations as live objects.
"""

import asyncio
import hmac
import ipaddress
import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ConfigDict, Field, StringConstraints, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ckqti.errors import CkqtiError, OptionError, QueryError, option_count
from retriever.index import SortedDocids
from retriever.results import search_json
from retriever.search import Searcher
from retriever.service_answers import (
    BatchAnswer,
    Document,
    Health,
    SearchAnswer,
    answers,
    declare_api_key,
    error_answers,
)

API_KEY_HEADER = "x-api-key"


@dataclass(frozen=True)
class ServiceConfig:
    """Limits and access control of one service.

    Args:
        api_key: when set, every request must carry it in the ``X-API-Key`` header.
        max_k: largest ``k`` a request may ask for.
        max_batch: most queries in one ``/search/batch`` request.
        max_body_bytes: largest request body; larger ones get 413 before any parsing.
        max_query_chars: longest query string.
        workers: search threads (default: the CPU count, at most 8).
    """

    api_key: str | None = field(default=None, repr=False)
    max_k: int = 1000
    max_batch: int = 100
    max_body_bytes: int = 1 << 20
    max_query_chars: int = 10_000
    workers: int = field(default_factory=lambda: min(8, os.cpu_count() or 1))

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must be a non-empty string or None")
        for name in ("max_k", "max_batch", "max_body_bytes", "max_query_chars", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


def request_models(config: ServiceConfig):
    """The pydantic models of ``/search`` and ``/search/batch`` bodies, with ``config``'s limits.

    Strict: ``k`` must be a JSON integer and queries JSON strings; unknown fields are refused.
    """
    strict = ConfigDict(extra="forbid", strict=True)
    query = Annotated[str, StringConstraints(min_length=1, max_length=config.max_query_chars)]
    k = Annotated[int, Field(ge=1, le=config.max_k)]
    queries = Annotated[list[query], Field(min_length=1, max_length=config.max_batch)]
    search = create_model("SearchRequest", __config__=strict, query=(query, ...), k=(k, 10))
    batch = create_model("BatchSearchRequest", __config__=strict, queries=(queries, ...), k=(k, 10))
    return search, batch


class DocidMap:
    """``docid -> (shard, row)`` over an index's document stores: each shard's docids sorted once, on
    first use (:class:`retriever.index.SortedDocids`; at 1M documents 0.24 s and 8 MB, where a dict of
    them took 0.63 s and held 200 MB for the server's life), then searched shard by shard."""

    def __init__(self, searcher: Searcher):
        self.searcher = searcher
        self._sorted: list[SortedDocids] | None = None
        self._lock = threading.Lock()

    def shards(self) -> list[SortedDocids]:
        if self._sorted is not None:
            return self._sorted
        with self._lock:
            if self._sorted is None:
                self._sorted = [shard.sorted_docids() for shard in self.searcher.index.shards]
            return self._sorted

    def where(self, docid: str) -> tuple[int, int] | None:
        for si, docids in enumerate(self.shards()):
            row = docids.row(docid)
            if row is not None:
                return si, row
        return None

    def document(self, docid: str) -> dict | None:
        where = self.where(docid)
        if where is None:
            return None
        return self.searcher.index.shards[where[0]].document(where[1])


class ApiKeyMiddleware:
    """Refuses (401) any HTTP request without the right ``X-API-Key``, before its body is read.

    The comparison is constant-time (:func:`hmac.compare_digest`).
    """

    def __init__(self, app, api_key: str):
        self.app = app
        self.key = api_key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        keys = [value for name, value in scope["headers"] if name == API_KEY_HEADER.encode()]
        given = keys[0] if len(keys) == 1 else b""
        if hmac.compare_digest(given, self.key):
            return await self.app(scope, receive, send)
        # two keys: the last one was checked, so a wrong key before the right one passed
        detail = "missing X-API-Key header" if not keys else "X-API-Key given twice" if len(keys) > 1 else "wrong API key"
        response = JSONResponse({"detail": detail}, status_code=401, headers={"WWW-Authenticate": "X-API-Key"})
        await response(scope, receive, send)


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body too large: at most {limit} bytes")


class BodyLimitMiddleware:
    """Refuses (413) a request body over ``max_bytes`` before anything parses it.

    A declared ``Content-Length`` over the limit is answered at once, without reading the
    body; a body streamed without one (chunked) is counted as it arrives and refused as soon
    as it passes the limit (the error is raised from ``receive``, inside the body read, and
    answered by the app's error handler).
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            err = BodyTooLarge(self.max_bytes)
            return await JSONResponse({"detail": err.detail}, status_code=413)(scope, receive, send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, limited_receive, send)


def validation_message(errors) -> str:
    """One line from pydantic's error list: ``field: message; field: message``."""
    parts = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        loc = loc[1:] if loc[:1] in (["body"], ["query"]) else loc  # where: the body, or the URL's parameters
        loc = loc or (["request body"] if e.get("loc") == ("body",) else [])  # the body itself: none, or not an object
        parts.append(f"{'.'.join(loc)}: {e['msg']}" if loc else e["msg"])
    return "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Every error becomes ``{"detail": "<one line>"}``: 400 for bad JSON, 422 for invalid fields."""

    async def on_validation(request, exc: RequestValidationError):
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method == "POST" and ctype != "application/json" and \
                not (ctype.startswith("application/") and ctype.endswith("+json")):
            return JSONResponse({"detail": "send the request body as JSON with Content-Type: application/json"},
                                status_code=415)
        errors = exc.errors()
        bad_json = [e for e in errors if e.get("type") == "json_invalid"]
        if bad_json:
            reason = (bad_json[0].get("ctx") or {}).get("error", "")
            return JSONResponse({"detail": f"request body is not valid JSON ({reason})"}, status_code=400)
        return JSONResponse({"detail": validation_message(errors)}, status_code=422)

    async def on_http_error(request, exc: StarletteHTTPException):
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # the router names the methods of the first route on the path: all of them, RFC 9110
            headers = {**(headers or {}), "Allow": ", ".join(path_methods(request))}
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http_error)


def path_methods(request: Request) -> list[str]:
    """The methods that the routes of ``request``'s path take, sorted (each route says only its own in a 405)."""
    routes = [r for r in request.app.routes if r.matches(request.scope)[0] is not Match.NONE]
    return sorted({m for r in routes for m in getattr(r, "methods", None) or ()})


def create_app(
    searcher: Searcher,
    api_key: str | None = None,
    max_k: int = 1000,
    max_batch: int = 100,
    max_body_bytes: int = 1 << 20,
    max_query_chars: int = 10_000,
    workers: int | None = None,
) -> FastAPI:
    """The search service over ``searcher`` (see the module docstring for the endpoints)."""
    extra = {} if workers is None else {"workers": workers}
    config = ServiceConfig(api_key, max_k, max_batch, max_body_bytes, max_query_chars, **extra)
    pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="ckqti-search")

    @asynccontextmanager
    async def lifespan(app):
        await asyncio.get_running_loop().run_in_executor(pool, warm_up, searcher)
        try:
            yield
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    app = FastAPI(title="ckqti", lifespan=lifespan, docs_url=None, redoc_url=None,
                  responses=error_answers(401) if config.api_key is not None else None)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    if config.api_key is not None:  # added last, so it runs first: no body is read before the key is checked
        app.add_middleware(ApiKeyMiddleware, api_key=config.api_key)
        document_api_key(app)
    add_routes(app, searcher, config, pool)
    return app


def document_api_key(app: FastAPI) -> None:
    """``app``'s /openapi.json declares the ``X-API-Key`` header as an apiKey security scheme that every operation
    requires (the middleware checks it; a FastAPI ``Security`` dependency would document it too, at a call a request)."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = declare_api_key(build(), "X-API-Key")
        return app.openapi_schema

    app.openapi = openapi


def pool_runner(pool: ThreadPoolExecutor, workers: int):
    """``await in_pool(request, fn, *args)``: ``fn(*args)`` on one of ``pool``'s ``workers`` threads.

    At most ``2 * workers`` requests are handed to the pool (one running and one queued a thread); a request
    that had to wait for its turn is handed on only if its client is still there, else it ends with a 499 that
    nobody receives. Without this, every request was queued in the pool at once and searched even when its
    client had hung up: 100 batches of 100 queries at k=1,000 sent and dropped at once kept the sample's server
    busy for 10 s, ahead of every client after them."""
    free = asyncio.Semaphore(2 * workers)

    async def in_pool(request: Request, fn, *args):
        waited = free.locked()
        async with free:
            if waited and await request.is_disconnected():  # the check costs 16 us: only after a wait
                raise HTTPException(499, "the client closed the connection")
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    return in_pool


def add_routes(app: FastAPI, searcher: Searcher, config: ServiceConfig, pool: ThreadPoolExecutor) -> None:
    SearchRequest, BatchSearchRequest = request_models(config)
    docids = DocidMap(searcher)

    in_pool = pool_runner(pool, config.workers)

    def one(query: str, k: int) -> dict:
        return search_json(searcher, searcher.search(query, k))

    def batch(queries: list[str], k: int) -> list[dict]:
        return [{"query": q, "error": str(r)} if isinstance(r, QueryError) else search_json(searcher, r)
                for q, r in zip(queries, searcher.search_many(queries, k))]

    # HEAD: a load balancer's probe (Starlette sends no body); a route of its own, for an operationId of its own,
    # documented without a body (response_class only sets that: the endpoint's own JSONResponse is what is sent)
    @app.head("/health", response_class=Response, responses={200: {"description": "GET /health's status and headers"}})
    @app.get("/health", responses=answers(Health))
    async def health() -> JSONResponse:
        index = searcher.index
        anytime = searcher.mode == "anytime"  # exact mode reads neither budget nor slack
        return JSONResponse({
            "status": "ok", "model": index.model_id, "num_docs": index.num_docs, "shards": len(index.shards),
            "mode": searcher.mode, "budget": searcher.budget if anytime else None,
            "slack": searcher.slack if anytime else None,
            "channel_weights": dict(zip(index.quantizer.weights, searcher.channel_mult.tolist())),
            "max_k": config.max_k, "max_batch": config.max_batch,
            "max_body_bytes": config.max_body_bytes,
        })

    async def answer(request: Request, query: str, k: int) -> JSONResponse:
        try:
            return JSONResponse(await in_pool(request, one, query, k))
        except QueryError as e:
            raise HTTPException(422, str(e)) from None

    body_errors = (400, 413, 415, 422)

    @app.post("/search", responses=answers(SearchAnswer, *body_errors))
    async def search(request: Request, req: SearchRequest) -> JSONResponse:
        return await answer(request, req.query, req.k)

    @app.get("/search", responses=answers(SearchAnswer, 422))  # a browser's or curl's ?q=...&k=...: the same answer as POST /search
    async def search_url(request: Request, q: Annotated[str, Query(min_length=1, max_length=config.max_query_chars)],
                         k: Annotated[int, Query(ge=1, le=config.max_k)] = 10) -> JSONResponse:
        check_url_parameters(request.query_params)
        return await answer(request, q, k)

    @app.post("/search/batch", responses=answers(BatchAnswer, *body_errors))
    async def search_batch(request: Request, req: BatchSearchRequest) -> JSONResponse:
        return JSONResponse({"results": await in_pool(request, batch, req.queries, req.k)})

    # ``:path`` lets a docid hold "/"; it is only ever looked up among the shards' docids.
    @app.get("/documents/{docid:path}", responses=answers(Document, 404, 422))
    async def document(request: Request, docid: str) -> JSONResponse:
        doc = await in_pool(request, docids.document, docid)
        if doc is None:
            raise HTTPException(404, f"document {docid!r} is not in the index")
        return JSONResponse(doc)


def check_url_parameters(params) -> None:
    """``GET /search``'s parameters as strictly as POST /search's body: q and k once each, k in
    ASCII digits (FastAPI read ``k=5.0`` and ``k=٣`` as integers, took the last of two, and
    ignored any other parameter)."""
    for name in params:
        if name not in ("q", "k"):
            raise HTTPException(422, f"{name}: unknown parameter (GET /search takes q and k)")
        if len(params.getlist(name)) > 1:
            raise HTTPException(422, f"{name}: given twice")
    k = params.get("k")
    if k is not None and not (k.isascii() and k.isdigit()):
        raise HTTPException(422, "k: Input should be a valid integer")


def warm_up(searcher: Searcher) -> None:
    """Load the compiled kernels (Numba's cache) with one search, so the first request does not pay for it."""
    index = searcher.index
    if not index.terms:
        return
    try:
        searcher.search(index.terms[int(np.argmax(np.asarray(index.df)))], 10)
    except QueryError:
        pass


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free port, see ``getsockname()``).

    Made with the protocol number ``IPPROTO_TCP`` (not 0, as :func:`socket.create_server` does):
    asyncio sets ``TCP_NODELAY`` only on such sockets' connections, and without it every answer
    on a keep-alive connection waits ~40 ms for a delayed ACK (Nagle's algorithm).
    """
    family, kind, proto, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, socket.IPPROTO_TCP,
                                                         socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        if os.name == "posix":  # on Windows it lets a second server bind a port in use, as asyncio notes
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def check_api_key(api_key) -> None:
    """The service's key is None (no key) or a non-empty string without surrounding whitespace, which HTTP
    drops from a header's value (no request's ``X-API-Key`` could match it); else an :class:`OptionError`."""
    if api_key is not None and (not isinstance(api_key, str) or not api_key or api_key != api_key.strip()):
        raise OptionError("api_key must be a non-empty string without surrounding whitespace, or None", ("api_key",))


def checked_server_options(port, api_key, max_k, workers) -> tuple[int, int | None]:
    """:func:`serve`'s options from a Python caller, checked before the index opens (an :class:`OptionError`
    naming the first wrong one): ``port`` in 0..65535, ``api_key`` (:func:`check_api_key`), ``max_k`` and
    ``workers`` (None: the default) counts. Returns ``(max_k, workers)`` as ints."""
    if option_count(port, "port", 0) > 65535:
        raise OptionError(f"port must be in 0..65535, got {port}", ("port",))
    check_api_key(api_key)
    return option_count(max_k, "max_k"), None if workers is None else option_count(workers, "workers")


def environment_api_key(variable: str) -> str:
    """The API key held in the environment variable ``variable`` (``ckqti serve --api-key-env``); a one-line
    :class:`CkqtiError` where it is unset, empty or blank, or has surrounding whitespace (:func:`check_api_key`)."""
    api_key = os.environ.get(variable)
    if not api_key or not api_key.strip():
        raise CkqtiError(f"--api-key-env: environment variable {variable} is not set or empty")
    if api_key != api_key.strip():  # HTTP drops a header value's surrounding blanks: no request could match
        raise CkqtiError(f"--api-key-env: the key in {variable} starts or ends with whitespace, "
                         "which an X-API-Key header cannot carry")
    return api_key


def serve(searcher: Searcher, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          max_k: int = 1000, workers: int | None = None, access_log: bool = False, on_ready=None) -> None:
    """Serve ``searcher`` (:func:`create_app`) on ``host:port`` until interrupted: binds first (port 0: a free
    one; a refusal, such as a port in use, is a one-line :class:`CkqtiError`), then calls ``on_ready(url)``,
    then runs the server (:func:`run_server`)."""
    app = create_app(searcher, api_key=api_key, max_k=max_k, workers=workers)
    try:
        sock = listen_socket(host, port)
    except OSError as e:
        raise CkqtiError(f"cannot listen on {host}:{port} ({e.strerror or e})") from None
    bound = sock.getsockname()
    if on_ready is not None:
        on_ready(f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}")
    run_server(app, sock, access_log=access_log)


#: Seconds a connection may take to send a whole request, headers and body (from when it opens, or
#: from the end of its previous answer), before it is closed: without it, a few hundred connections
#: that never finish their headers (slowloris), or their body (a slow POST), hold every slot of
#: ``max_connections`` and everyone else gets 503; and a stalled body kept a graceful shutdown
#: waiting for its request forever.
REQUEST_TIMEOUT_S = 10.0


def request_timeout_protocol(seconds: float):
    """uvicorn's h11 protocol, closing a connection whose next request (headers and body) is not
    complete ``seconds`` after it opened or after its last answer (uvicorn times out only idle
    keep-alive connections, and stops that timer at the first byte). A request received in time
    is never cut, however long its search takes."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class RequestTimeoutProtocol(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_request_timer()

        def on_response_complete(self) -> None:
            self._arm_request_timer()  # first: the call below may already take a pipelined request
            super().on_response_complete()

        def _arm_request_timer(self) -> None:
            self._deadline = deadline = object()  # a later answer arms a new deadline, ending this one
            waiting_after = self.cycle  # a new request replaces the cycle once its headers are in
            self.loop.call_later(seconds, self._request_deadline, deadline, waiting_after)

        def _request_deadline(self, deadline, waiting_after) -> None:
            if deadline is not self._deadline or self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is waiting_after or (cycle.more_body and not cycle.response_started):  # headers or body
                self.transport.close()

    return RequestTimeoutProtocol


def server_config(app: FastAPI, access_log: bool = False, max_connections: int = 256,
                  request_timeout: float = REQUEST_TIMEOUT_S):
    """The ``uvicorn.Config`` :func:`run_server` serves ``app`` with: at most ``max_connections``
    open at once (more get 503), each given ``request_timeout`` seconds to send a request."""
    import uvicorn

    return uvicorn.Config(
        app, log_level="info" if access_log else "warning", access_log=access_log, server_header=False,
        limit_concurrency=max_connections, http=request_timeout_protocol(request_timeout),
    )


def run_server(app: FastAPI, sock: socket.socket, access_log: bool = False, max_connections: int = 256,
               request_timeout: float = REQUEST_TIMEOUT_S) -> None:
    """Serve ``app`` with uvicorn on an already listening socket until interrupted (Ctrl-C, SIGTERM;
    a second Ctrl-C ends it without waiting for the requests in flight)."""
    import uvicorn

    errors = logging.getLogger("uvicorn.error")
    errors.addFilter(not_cancelled)
    try:
        uvicorn.Server(server_config(app, access_log, max_connections, request_timeout)).run(sockets=[sock])
    finally:
        errors.removeFilter(not_cancelled)


def not_cancelled(record: logging.LogRecord) -> bool:
    """False for uvicorn's report of a task cancelled on purpose: a second Ctrl-C (its force quit) cancels
    every request in flight and the app's lifespan, and each was logged with a CancelledError traceback
    (a request's as the exception, the lifespan's as the text starlette sends uvicorn)."""
    if record.exc_info:
        return not isinstance(record.exc_info[1], asyncio.CancelledError)
    text = record.getMessage()
    return not (text.startswith("Traceback") and text.rstrip().endswith("asyncio.exceptions.CancelledError"))
