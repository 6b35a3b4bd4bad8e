"""The HTTP search service on a real uvicorn server (loopback, a free port): answers equal the
CLI's, validation errors are 4xx with a message, the API key is enforced, concurrent clients
all get the right answers. Index: the bundled sample (1,500 MS MARCO passages), NDRM2, 3 shards."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from click.testing import CliRunner

from ckqti import api
from ckqti.cli import cli
from retriever.results import search_json
from retriever.service import ServiceConfig, create_app, is_loopback, listen_socket, server_config
from tests.processes import sigint_from_a_terminal

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "ckqti" / "data" / "sample"
KEY = "test-key-4f1c9a"
LIMITS = dict(max_k=50, max_batch=8, max_body_bytes=4096, max_query_chars=300, workers=4)


def sample_queries() -> list[str]:
    return [line.split("\t", 1)[1].strip() for line in (SAMPLE / "queries.tsv").read_text().splitlines() if line]


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serve") / "sample"
    api.index(SAMPLE / "corpus.jsonl", out, model="ndrm2", shard_size=600, progress=False)
    return out


@pytest.fixture(scope="module")
def searcher(sample_index):
    return api.open_searcher(sample_index)


@contextmanager
def running(app, **config):
    """``app`` served by uvicorn as ``ckqti serve`` serves it (:func:`server_config`'s ``config``), in a
    background thread on a free loopback port; yields the port."""
    sock = listen_socket("127.0.0.1", 0)
    server = uvicorn.Server(server_config(app, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.fixture(scope="module")
def port(searcher):
    with running(create_app(searcher, **LIMITS)) as p:
        yield p


@pytest.fixture(scope="module")
def keyed_port(searcher):
    with running(create_app(searcher, api_key=KEY, **LIMITS)) as p:
        yield p


def call(port, method, path, body=None, headers=None, conn=None):
    """One request; ``body``: a dict (sent as JSON), bytes, or an iterable of chunks. Returns (status, JSON)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=headers, encode_chunked=not isinstance(body, (bytes, type(None))))
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        if own:
            conn.close()


def reference(searcher, query, k):
    return search_json(searcher, searcher.search(query, k))


def test_search_answers_equal_the_cli_json(port, searcher, sample_index):
    for q in sample_queries():
        status, got = call(port, "POST", "/search", {"query": q, "k": 10})
        assert status == 200
        assert got == reference(searcher, q, 10)
        assert len(got["hits"]) == 10
    q = sample_queries()[0]
    res = CliRunner().invoke(cli, ["search", q, "--index", str(sample_index), "-k", "7", "--json"])
    assert res.exit_code == 0, res.output
    assert call(port, "POST", "/search", {"query": q, "k": 7})[1] == json.loads(res.stdout)


def test_k_defaults_to_ten(port, searcher):
    status, got = call(port, "POST", "/search", {"query": "daily life of thai people"})
    assert status == 200 and got == reference(searcher, "daily life of thai people", 10)


def test_a_search_by_url_answers_as_the_post(port, searcher):
    """GET /search?q=...&k=... (a browser, curl without a body) was 405; it answers as POST /search does,
    with the same limits and one-line 422s."""
    from urllib.parse import quote

    for q in sample_queries()[:3] + ["caf\u00e9 & thai?"]:
        for k in (None, 4):
            path = f"/search?q={quote(q)}" + ("" if k is None else f"&k={k}")
            assert call(port, "GET", path) == call(port, "POST", "/search", {"query": q, **({} if k is None else {"k": k})})
    assert call(port, "GET", "/search?q=thai&k=3") == (200, reference(searcher, "thai", 3))
    for path, message in (("/search?q=thai&k=51", "k: Input should be less than or equal to 50"),
                          ("/search?q=thai&k=0", "k: Input should be greater than or equal to 1"),
                          ("/search?q=thai&k=ten", "k: Input should be a valid integer"),
                          ("/search?q=thai&k=5.0", "k: Input should be a valid integer"),  # was read as 5
                          ("/search?q=thai&k=%D9%A3", "k: Input should be a valid integer"),  # an Arabic-Indic 3
                          ("/search?q=thai&n=3", "n: unknown parameter"),  # was ignored: 10 results
                          ("/search?q=thai&k=3&k=4", "k: given twice"),  # the last one was taken
                          ("/search?q=", "q: String should have at least 1 character"),
                          ("/search?k=3", "q: Field required"),
                          (f"/search?q={'thai%20' * 61}", "q: String should have at most 300"),
                          ("/search?q=who%20is%20the", "no searchable terms")):
        status, got = call(port, "GET", path)
        assert status == 422 and message in got["detail"] and "\n" not in got["detail"], (path, got)


def test_batch_equals_singles_and_reports_unsearchable_queries(port, searcher):
    queries = sample_queries()[:5] + ["the of and"] + sample_queries()[5:7]
    status, got = call(port, "POST", "/search/batch", {"queries": queries, "k": 5})
    assert status == 200 and len(got["results"]) == len(queries)
    for q, r in zip(queries, got["results"]):
        if q == "the of and":
            assert r["query"] == q and "no searchable terms" in r["error"]
        else:
            assert r == reference(searcher, q, 5) == call(port, "POST", "/search", {"query": q, "k": 5})[1]


def test_documents_are_found_in_every_shard(port, searcher):
    shards = searcher.index.shards
    assert len(shards) == 3
    for sh in shards:
        for row in (0, sh.num_docs - 1):
            status, got = call(port, "GET", f"/documents/{sh.docid(row)}")
            assert status == 200 and got == sh.document(row)
    hit = searcher.search(sample_queries()[1], 1).hits[0]
    assert call(port, "GET", f"/documents/{hit.docid}")[1] == searcher.document(hit)


@pytest.mark.parametrize("docid", ["no-such-doc", "../../../../etc/passwd", "..%2F..%2Fmanifest.json", "%00"])
def test_unknown_documents_are_404_and_never_read_from_disk(port, docid):
    status, got = call(port, "GET", f"/documents/{docid}")
    assert status == 404 and "is not in the index" in got["detail"]


BAD_REQUESTS = [
    ("bad JSON", "/search", b'{"query": "thai', {"Content-Type": "application/json"}, 400, "not valid JSON"),
    ("not JSON", "/search", b"query=thai", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"),
    ("k too large", "/search", {"query": "thai", "k": 51}, None, 422, "k: Input should be less than or equal to 50"),
    ("k zero", "/search", {"query": "thai", "k": 0}, None, 422, "k: Input should be greater than or equal to 1"),
    ("k a string", "/search", {"query": "thai", "k": "10"}, None, 422, "k: Input should be a valid integer"),
    ("k a float", "/search", {"query": "thai", "k": 2.5}, None, 422, "k: Input should be a valid integer"),
    ("empty query", "/search", {"query": ""}, None, 422, "query: String should have at least 1 character"),
    ("stopwords", "/search", {"query": "who is the"}, None, 422, "no searchable terms"),
    ("blank query", "/search", {"query": "   "}, None, 422, "no searchable terms"),
    ("query too long", "/search", {"query": "thai " * 61}, None, 422, "query: String should have at most 300"),
    ("no query", "/search", {"k": 3}, None, 422, "query: Field required"),
    ("query not a string", "/search", {"query": ["thai"]}, None, 422, "query: Input should be a valid string"),
    ("a path field", "/search", {"query": "thai", "index": "/etc"}, None, 422, "index: Extra inputs are not permitted"),
    ("JSON not an object", "/search", b"[1, 2]", {"Content-Type": "application/json"}, 422,
     "request body: Input should be a valid dictionary"),
    ("no body", "/search", b"", {"Content-Type": "application/json"}, 422, "request body: Field required"),
    ("JSON null", "/search/batch", b"null", {"Content-Type": "application/json"}, 422, "request body: Input should be"),
    ("too many queries", "/search/batch", {"queries": ["thai"] * 9}, None, 422, "queries: List should have at most 8"),
    ("no queries", "/search/batch", {"queries": []}, None, 422, "queries: List should have at least 1"),
    ("empty batch query", "/search/batch", {"queries": ["thai", ""]}, None, 422, "queries.1: String should have at least"),
    ("batch k too large", "/search/batch", {"queries": ["thai"], "k": 1000}, None, 422, "k: Input should be less than"),
    ("declared too large", "/search", b"x" * 5000, {"Content-Type": "application/json"}, 413, "at most 4096 bytes"),
    ("streamed too large", "/search", [b"x" * 1000] * 5, {"Content-Type": "application/json"}, 413, "at most 4096 bytes"),
]


@pytest.mark.parametrize("name,path,body,headers,status,message", BAD_REQUESTS, ids=[r[0] for r in BAD_REQUESTS])
def test_bad_requests_get_a_4xx_with_a_message(port, name, path, body, headers, status, message):
    got_status, got = call(port, "POST", path, body, headers)
    assert got_status == status
    assert isinstance(got["detail"], str) and message in got["detail"]


def response_schema(spec: dict, method: str, path: str, status: int) -> dict:
    """The schema /openapi.json gives ``method path``'s JSON answers of ``status``, as written (a KeyError: none)."""
    return spec["paths"][path][method.lower()]["responses"][str(status)]["content"]["application/json"]["schema"]


def documented(spec: dict, method: str, path: str, status: int) -> dict:
    """:func:`response_schema` with its $ref resolved."""
    schema = response_schema(spec, method, path, status)
    return spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema


def test_the_openapi_document_describes_every_error_the_service_answers(port, keyed_port):
    """Schemathesis (session 47) found /openapi.json at odds with the answers: a 422 was documented as FastAPI's
    ``{"detail": [{"loc", "msg", "type"}]}`` where the service sends ``{"detail": "<one line>"}``, and 400, 401,
    404, 413 and 415 were not documented at all; GET and HEAD /health shared one operationId."""
    status, spec = call(port, "GET", "/openapi.json")
    assert status == 200
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)), ids
    answers = [("POST", path, status) for _, path, _, _, status, _ in BAD_REQUESTS]
    answers += [("GET", "/search", 422), ("GET", "/documents/{docid}", 404)]
    assert call(port, "GET", "/search?q=thai&x=1")[0] == 422 and call(port, "GET", "/documents/x")[0] == 404
    for method, path, status in answers:
        schema = documented(spec, method, path, status)
        assert (schema["type"], list(schema["properties"]), schema["required"]) == ("object", ["detail"], ["detail"])
        assert schema["properties"]["detail"]["type"] == "string", (method, path, status, schema)
    assert all("401" not in op["responses"] for ops in spec["paths"].values() for op in ops.values())  # no key, no 401
    status, keyed = call(keyed_port, "GET", "/openapi.json", headers={"X-API-Key": KEY})
    assert status == 200
    for path, ops in keyed["paths"].items():
        for method in ops:
            assert documented(keyed, method, path, 401)["properties"]["detail"]["type"] == "string", (method, path)


def answer_validator(spec: dict, method: str, path: str):
    """A JSON Schema validator of ``method path``'s 200 answers as ``spec`` (an /openapi.json) documents them."""
    from jsonschema import Draft202012Validator

    schema = response_schema(spec, method, path, 200)
    return Draft202012Validator({**schema, "components": spec.get("components", {})})  # its $refs point there


MAPS = ("channel_weights",)  # fields whose keys are data (the index's channels), not field names


def assert_exactly_documented(validator, answer, where: str) -> None:
    """``answer`` is valid, and would not be with any field, here or in a nested object, dropped, added or of
    another JSON type: the schema names every field the service sends, requires it and gives its type."""
    assert not list(validator.iter_errors(answer)), (where, [e.message for e in validator.iter_errors(answer)])

    def variants(value):  # (copy of value with one change, what changed)
        if isinstance(value, dict):
            yield {**value, "unexpected": 1}, "field added"
            for name, inner in value.items():
                yield {k: v for k, v in value.items() if k != name}, f"{name} dropped"
                yield {**value, name: {"wrong": "type"}}, f"{name} of another type"
                if name in MAPS:
                    yield {**value, name: dict.fromkeys(inner, "x")}, f"{name}'s values of another type"
                    continue
                for changed, what in variants(inner):
                    yield {**value, name: changed}, f"{name}.{what}"
        elif isinstance(value, list) and value:
            for i in {0, len(value) - 1}:  # a batch's last answer is its error
                yield value[:i] + [{"wrong": "type"}] + value[i + 1:], f"[{i}] of another type"
                for changed, what in variants(value[i]):
                    yield value[:i] + [changed] + value[i + 1:], f"[{i}].{what}"

    for changed, what in variants(answer):
        assert not validator.is_valid(changed), f"{where}: the schema allows an answer with {what}"


def test_the_openapi_document_describes_every_success_answer(port, searcher, sample_index):
    """/openapi.json gave every 200 an empty schema, so a generated client knew nothing of the answers: each route's
    real answers are validated against its documented schema, which must name, require and type every field."""
    _, spec = call(port, "GET", "/openapi.json")
    docid = searcher.index.shards[1].docid(0)
    q = sample_queries()[0]
    cases = [("GET", "/health", "/health", None), ("POST", "/search", "/search", {"query": "thai people zzzqqq", "k": 3}),
             ("GET", "/search", "/search?q=thai&k=2", None),
             ("POST", "/search/batch", "/search/batch", {"queries": [q, "who is the"], "k": 2}),
             ("GET", "/documents/{docid}", f"/documents/{docid}", None)]
    for method, route, path, body in cases:
        status, answer = call(port, method, path, body)
        assert status == 200, (path, answer)
        assert path != "/search" or answer["oov"] == ["zzzqqq"]  # a list of strings, not empty
        assert_exactly_documented(answer_validator(spec, method, route), answer, f"{method} {path}")
    assert "content" not in spec["paths"]["/health"]["head"]["responses"]["200"]  # HEAD's answer has no body
    assert call(port, "POST", "/search", {"query": "zzzqqq", "k": 3})[1]["hits"] == []  # no hits: still valid
    assert answer_validator(spec, "POST", "/search").is_valid(call(port, "POST", "/search", {"query": "zzzqqq"})[1])
    anytime = api.open_searcher(sample_index, "anytime", 1000, slack=0.5)  # budget and slack numbers, not null
    with running(create_app(anytime, **LIMITS)) as p:
        _, spec = call(p, "GET", "/openapi.json")
        answer = call(p, "GET", "/health")[1]
    assert answer["budget"] == 1000 and answer["slack"] == 0.5
    assert_exactly_documented(answer_validator(spec, "GET", "/health"), answer, "anytime GET /health")


def test_the_openapi_document_declares_the_api_key_exactly_when_one_is_required(port, keyed_port):
    """A keyed service's X-API-Key was no security scheme of /openapi.json, so neither a generated client nor a
    fuzzer knew to send it: it is an apiKey scheme in header X-API-Key, required by every operation, when the
    service has a key, and absent when it has none."""
    _, spec = call(port, "GET", "/openapi.json")
    assert "securitySchemes" not in spec.get("components", {}) and "security" not in spec
    assert all("security" not in op for ops in spec["paths"].values() for op in ops.values())
    _, keyed = call(keyed_port, "GET", "/openapi.json", headers={"X-API-Key": KEY})
    (name, scheme), = keyed["components"]["securitySchemes"].items()
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "X-API-Key")
    assert keyed["security"] == [{name: []}]  # every operation, none overriding it
    assert all("security" not in op for ops in keyed["paths"].values() for op in ops.values())
    assert call(keyed_port, "GET", "/health", headers={scheme["name"]: KEY})[0] == 200  # the key, where it says


def test_a_body_of_exactly_the_limit_is_answered(port, searcher):
    """max_body_bytes is the largest body taken, declared (Content-Length) or streamed (chunked)."""
    body = json.dumps({"query": "thai", "k": 3}).encode()
    body = body[:-1] + b" " * (LIMITS["max_body_bytes"] - len(body)) + b"}"  # JSON whitespace up to the limit
    assert len(body) == LIMITS["max_body_bytes"]
    headers = {"Content-Type": "application/json"}
    assert call(port, "POST", "/search", body, headers) == (200, reference(searcher, "thai", 3))
    assert call(port, "POST", "/search", [body[:1000], body[1000:]], headers) == (200, reference(searcher, "thai", 3))


def test_the_service_still_answers_after_bad_requests(port, searcher):
    for _, path, body, headers, _, _ in BAD_REQUESTS:
        call(port, "POST", path, body, headers)
    assert call(port, "POST", "/search", {"query": "thai", "k": 3})[1] == reference(searcher, "thai", 3)


def test_api_key_is_required_on_every_endpoint(keyed_port, searcher):
    body = {"query": "thai", "k": 3}
    for method, path, b in [("GET", "/health", None), ("POST", "/search", body), ("POST", "/search/batch", {"queries": ["x"]}),
                            ("GET", "/documents/x", None), ("GET", "/search?q=thai", None)]:
        status, got = call(keyed_port, method, path, b)
        assert status == 401 and got["detail"] == "missing X-API-Key header"
        for wrong in (KEY[:-1] + "0", KEY + "0", KEY[:-1]):  # the whole key, nothing more or less
            status, got = call(keyed_port, method, path, b, {"X-API-Key": wrong})
            assert status == 401 and got["detail"] == "wrong API key"
    status, got = call(keyed_port, "POST", "/search", body, {"X-API-Key": KEY})
    assert status == 200 and got == reference(searcher, "thai", 3)


def test_two_api_key_headers_are_refused(keyed_port):
    """Two X-API-Key headers: the last one was checked, so a wrong key before the right one passed."""
    import http.client

    for keys in ((KEY + "0", KEY), (KEY, KEY + "0"), (KEY, KEY)):
        conn = http.client.HTTPConnection("127.0.0.1", keyed_port, timeout=60)
        conn.putrequest("GET", "/health")
        for key in keys:
            conn.putheader("X-API-Key", key)
        conn.endheaders()
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())["detail"]) == (401, "X-API-Key given twice"), keys
        conn.close()


def test_the_key_is_checked_before_the_body_is_read(keyed_port):
    status, got = call(keyed_port, "POST", "/search", b"x" * 5000, {"Content-Type": "application/json"})
    assert status == 401


def test_health_reports_the_index_and_limits(port, searcher):
    status, got = call(port, "GET", "/health")
    assert status == 200
    assert got["num_docs"] == 1500 and got["shards"] == 3 and got["model"] == searcher.index.model_id
    assert got["max_k"] == 50 and got["max_batch"] == 8
    assert got["mode"] == "exact" and got["channel_weights"] == {"idf": 1.0}
    assert got["budget"] is None and got["slack"] is None  # exact mode reads neither


def test_health_answers_head_as_load_balancers_probe_it(port):
    """HEAD /health (a load balancer's or `curl -I`'s probe) was 405 Method Not Allowed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("HEAD", "/health")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b"" and resp.getheader("content-type") == "application/json"
    finally:
        conn.close()


@pytest.mark.parametrize("method,path,allow", [("OPTIONS", "/search", "GET, POST"), ("DELETE", "/health", "GET, HEAD"),
                                               ("PUT", "/search/batch", "POST"), ("POST", "/documents/x", "GET")])
def test_a_method_not_allowed_is_told_every_method_of_its_path(port, method, path, allow):
    """A 405's Allow header lists the methods the path takes (RFC 9110, 15.5.6): /search's said POST alone, its GET
    being another route (schemathesis, session 47), and /health's GET alone once HEAD was a route of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        assert (resp.status, resp.getheader("allow")) == (405, allow)
        assert json.loads(resp.read()) == {"detail": "Method Not Allowed"}
    finally:
        conn.close()


def test_health_reports_the_anytime_budget_and_slack(sample_index):
    """``ckqti serve --mode anytime --budget N --slack F`` trades results for time: /health said
    "anytime" but not how far, so a client could not tell a budget of 1,000 from 200,000."""
    anytime = api.open_searcher(sample_index, "anytime", 1000, slack=0.5)
    with running(create_app(anytime, **LIMITS)) as p:
        status, got = call(p, "GET", "/health")
    assert status == 200 and (got["mode"], got["budget"], got["slack"]) == ("anytime", 1000, 0.5)


def test_health_reports_the_channel_weights_in_use(sample_index):
    """``ckqti serve --channel-weight`` changes every score; /health listed the mode and limits
    but not the weights, so a client could not tell a re-weighted service from the model's own."""
    weighted = api.open_searcher(sample_index, channel_weights={"idf": 0.5})
    with running(create_app(weighted, **LIMITS)) as p:
        status, got = call(p, "GET", "/health")
    assert status == 200 and got["channel_weights"] == {"idf": 0.5}


def test_sixteen_concurrent_clients_get_identical_answers(port, searcher):
    queries = sample_queries()
    want = {q: reference(searcher, q, 20) for q in queries}

    def client(c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            return [(q, *call(port, "POST", "/search", {"query": q, "k": 20}, conn=conn))
                    for q in queries[c % len(queries):] + queries[:c % len(queries)]]
        finally:
            conn.close()

    with ThreadPoolExecutor(16) as pool:
        answers = [a for client_answers in pool.map(client, range(16)) for a in client_answers]
    assert len(answers) == 16 * len(queries)
    for q, status, got in answers:
        assert status == 200 and got == want[q]


def test_config_is_validated():
    for bad in (dict(max_k=0), dict(max_batch=-1), dict(workers=True), dict(max_body_bytes=1.5), dict(api_key="")):
        with pytest.raises(ValueError):
            ServiceConfig(**bad)
    assert KEY not in repr(ServiceConfig(api_key=KEY))


def test_server_options_take_every_port_from_0_to_65535_and_return_the_counts_as_ints():
    """:func:`checked_server_options` refuses a port past 65535 (``api.serve``'s test) but not the ends of the range."""
    import numpy as np

    from retriever.service import checked_server_options

    assert checked_server_options(0, None, 10, None) == (10, None)
    assert checked_server_options(65535, KEY, np.int64(5), np.int64(2)) == (5, 2)


@pytest.mark.parametrize("system, reused", [("posix", 1), ("nt", 0)])
def test_listening_socket_reuses_an_address_only_on_posix(monkeypatch, system, reused):
    """As asyncio's servers: on Windows SO_REUSEADDR lets a second server bind a port another one
    listens on, so ``ckqti serve`` on a port in use would not be refused there."""
    import types

    import retriever.service

    monkeypatch.setattr(retriever.service, "os", types.SimpleNamespace(name=system))  # this module's only
    server = listen_socket("127.0.0.1", 0)
    try:
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == reused
    finally:
        server.close()


def test_listening_socket_gives_tcp_connections_asyncio_sets_nodelay_on():
    """asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP; with
    ``socket.create_server`` (protocol 0) every keep-alive answer waited for a delayed ACK."""
    server = listen_socket("127.0.0.1", 0)
    client = None
    try:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        with conn:
            assert conn.proto == socket.IPPROTO_TCP
    finally:
        server.close()
        if client is not None:
            client.close()


def test_the_service_does_not_import_the_cli():
    """The service sits below the CLI: its JSON answers come from retriever.results, not ckqti.cli."""
    code = "import sys, retriever.service; print(sorted(m for m in ('ckqti.cli', 'click') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"


def test_loopback_hosts():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.org"))


def test_cli_serve_reads_the_key_from_the_environment_and_warns_off_loopback(monkeypatch, sample_index):
    calls = []
    monkeypatch.setattr(api, "serve", lambda *a, **kw: (calls.append(a), kw["on_ready"]("http://h:1")))
    monkeypatch.setenv("CKQTI_TEST_KEY", KEY)
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0", "--api-key-env", "CKQTI_TEST_KEY"])
    assert res.exit_code == 0, res.output
    assert calls[-1][:4] == (str(sample_index), "127.0.0.1", 0, KEY) and "warning" not in res.output
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--host", "0.0.0.0"])
    assert res.exit_code == 0 and "not loopback" in res.stderr and "NO API key" in res.stderr
    assert calls[-1][1:4] == ("0.0.0.0", 8000, None)
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--api-key-env", "CKQTI_UNSET_VARIABLE"])
    assert res.exit_code != 0 and "CKQTI_UNSET_VARIABLE is not set" in res.output
    for padded, why in ((f" {KEY} ", "starts or ends with whitespace"), ("   ", "is not set or empty")):
        monkeypatch.setenv("CKQTI_TEST_KEY", padded)  # a .env line 'KEY=abc ' would never match a request
        res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--api-key-env", "CKQTI_TEST_KEY"])
        assert res.exit_code != 0 and why in res.output


def test_cli_serve_warns_off_loopback_only_once_it_listens(monkeypatch, tmp_path, sample_index):
    """The warning came before the index was opened and the port bound: a failure printed it, then
    the error ('cannot listen on 0.0.0.0:8000 (Address already in use)'), for a server never started."""
    import errno

    import retriever.service

    def in_use(host, port):
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(retriever.service, "listen_socket", in_use)
    for index in (sample_index, tmp_path / "none"):
        res = CliRunner().invoke(cli, ["serve", "--index", str(index), "--host", "0.0.0.0"])
        assert res.exit_code == 1 and "warning" not in res.output and res.output.startswith("Error: "), res.output
    monkeypatch.setattr(retriever.service, "listen_socket", lambda host, port: socket.socket())
    monkeypatch.setattr(retriever.service, "run_server", lambda app, sock, **kw: sock.close())
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--host", "0.0.0.0", "--port", "0"])
    assert res.exit_code == 0 and res.stderr.startswith("warning: binding 0.0.0.0, not loopback")
    assert res.stdout.startswith(f"serving {sample_index} at http://0.0.0.0:")


def test_cli_serve_takes_channel_weights_as_search_does(monkeypatch, sample_index):
    """--channel-weight reaches the served searcher (its scores are search's with the same weights);
    a channel the index lacks is a one-line error before anything listens."""
    import retriever.service

    served = []
    monkeypatch.setattr(retriever.service, "create_app", lambda searcher, **kw: served.append(searcher))
    monkeypatch.setattr(retriever.service, "listen_socket", lambda host, port: socket.socket())
    monkeypatch.setattr(retriever.service, "run_server", lambda app, sock, **kw: sock.close())
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0", "--channel-weight", "idf=2"])
    assert res.exit_code == 0, res.output
    query = sample_queries()[0]
    want = api.search(query, sample_index, k=5, channel_weights={"idf": 2.0})
    assert [(h.docid, h.score) for h in served[-1].search(query, 5).hits] == [(h.docid, h.score) for h in want.hits]
    assert list(served[-1].channel_mult) == [2.0]
    bad = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0", "--channel-weight", "one=2"])
    assert bad.exit_code == 1 and "the index's channels are ['idf']" in bad.output and len(served) == 1


def test_ckqti_serve_runs_and_stops(sample_index):
    env = dict(os.environ, CKQTI_TEST_KEY=KEY)
    cmd = [sys.executable, "-m", "ckqti.cli", "serve", "--index", str(sample_index), "--port", "0",
           "--api-key-env", "CKQTI_TEST_KEY", "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving "), proc.stderr.read() if proc.poll() is not None else line
        port = int(line.split()[3].rsplit(":", 1)[1])
        status, got = call(port, "GET", "/health", headers={"X-API-Key": KEY})
        assert status == 200 and got["num_docs"] == 1500
        assert call(port, "GET", "/health")[0] == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert KEY not in " ".join(cmd)


def test_connections_that_never_finish_their_headers_are_closed(searcher):
    """Connections stuck mid-headers (slowloris) hold every slot until the request timeout closes
    them; then the service answers again. A request that completes in time is unaffected."""
    with running(create_app(searcher, **LIMITS), max_connections=3, request_timeout=1.0) as p:
        stuck = []
        for _ in range(3):
            conn = socket.create_connection(("127.0.0.1", p))
            conn.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\n")  # headers never end
            stuck.append(conn)
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 503  # every slot held
        conn.close()
        for s in stuck:
            s.settimeout(10)
            assert s.recv(1024) == b""  # closed by the server
            s.close()
        assert call(p, "GET", "/health")[0] == 200
        keep = http.client.HTTPConnection("127.0.0.1", p, timeout=10)  # one keep-alive connection, two requests
        assert call(p, "POST", "/search", {"query": "cell", "k": 2}, conn=keep)[0] == 200
        time.sleep(0.5)
        assert call(p, "POST", "/search", {"query": "cell", "k": 2}, conn=keep)[0] == 200
        keep.close()


def stalled_body(port: int) -> socket.socket:
    """A connection whose request's headers are complete but whose body stops after 10 of 100 bytes."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"query\": ")
    return conn


def test_connections_that_never_finish_their_body_are_closed(searcher):
    """Connections stuck mid-body (a slow POST) hold every slot until the request timeout closes
    them, as those stuck mid-headers do; a body sent in parts within the time is answered."""
    with running(create_app(searcher, **LIMITS), max_connections=3, request_timeout=1.0) as p:
        stuck = [stalled_body(p) for _ in range(2)]  # with the connection asking, all 3 slots
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 503  # every slot held
        conn.close()
        for s in stuck:  # and the stuck requests were taken, not refused
            s.settimeout(0.1)
            with pytest.raises(socket.timeout):
                s.recv(1024)
        for s in stuck:
            s.settimeout(10)
            assert s.recv(1024) == b""  # closed by the server, without an answer
            s.close()
        body = json.dumps({"query": "cell", "k": 2}).encode()
        conn = socket.create_connection(("127.0.0.1", p))
        conn.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
        time.sleep(0.3)
        conn.sendall(body[5:])
        conn.settimeout(10)
        assert conn.recv(1024).startswith(b"HTTP/1.1 200 ")
        conn.close()


def test_a_stalled_body_does_not_hold_up_shutdown(searcher):
    """SIGTERM / Ctrl-C (``should_exit``) waits for requests in flight; one whose body never
    arrives is closed at the request timeout instead of keeping the server up forever."""
    sock = listen_socket("127.0.0.1", 0)
    server = uvicorn.Server(server_config(create_app(searcher, **LIMITS), request_timeout=1.0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    stuck = stalled_body(sock.getsockname()[1])
    try:
        time.sleep(0.2)
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server waited on the stalled body"
    finally:
        stuck.close()
        server.should_exit = server.force_exit = True
        thread.join(timeout=30)
        sock.close()


def test_a_second_ctrl_c_ends_requests_in_flight_without_a_traceback(sample_index):
    """Ctrl-C waits for the requests in flight; a second one (uvicorn's force quit) cancels them and the
    app's lifespan, each of which was logged with a CancelledError traceback. Here the request in flight
    waits for a body that never comes (the server holds it for the request timeout, 10 s)."""
    cmd = [sys.executable, "-m", "ckqti.cli", "serve", "--index", str(sample_index), "--port", "0", "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=sigint_from_a_terminal)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving "), proc.stderr.read() if proc.poll() is not None else line
        port = int(line.split()[3].rsplit(":", 1)[1])
        stuck = stalled_body(port)
        assert call(port, "GET", "/health")[0] == 200  # the server has read the stalled request's headers too
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the first Ctrl-C taken: the server stops listening
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                break
            time.sleep(0.05)
        stuck.settimeout(0.1)
        with pytest.raises(socket.timeout):  # still held: the server waits for it
            stuck.recv(1024)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stuck.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err and "ERROR" not in err, err
    assert err.strip() == "interrupted"


def test_cli_serve_hands_its_search_and_server_options_on(monkeypatch, sample_index):
    """--mode, --budget, --slack, --max-k, --workers and --access-log reach the served searcher, the app
    and the server (mutants dropping --max-k or --mode on their way to the API passed every test)."""
    import retriever.service

    served, ran = [], []
    monkeypatch.setattr(retriever.service, "create_app", lambda searcher, **kw: served.append((searcher, kw)))
    monkeypatch.setattr(retriever.service, "listen_socket", lambda host, port: socket.socket())
    monkeypatch.setattr(retriever.service, "run_server", lambda app, sock, **kw: ran.append(kw) or sock.close())
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0", "--mode", "anytime",
                                   "--budget", "7", "--slack", "0.5", "--max-k", "20", "--workers", "3", "--access-log"])
    assert res.exit_code == 0, res.output
    searcher, kw = served[-1]
    assert (searcher.mode, searcher.budget, searcher.slack) == ("anytime", 7, 0.5)
    assert (kw["max_k"], kw["workers"], ran[-1]["access_log"]) == (20, 3, True)
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0"])
    searcher, kw = served[-1]
    assert (searcher.mode, kw["max_k"], kw["workers"], ran[-1]["access_log"]) == ("exact", 1000, None, False)
    res = CliRunner().invoke(cli, ["serve", "--index", str(sample_index), "--port", "0", "--threads", "2"])
    assert res.exit_code == 0 and served[-1][1]["workers"] == 2, res.output  # run's name for search threads


def test_a_request_whose_client_hung_up_is_not_searched(sample_index):
    """A client that sent a request and hung up before a search thread was free got its search run all the
    same: 100 batches of 100 queries at k=1,000 sent and dropped at once kept the sample's server busy 10 s,
    and every client after them waited. The service queues at most one request a thread; one that waits for
    its turn beyond that is searched only if its client is still there. Here the one thread is held by a search
    that waits for the test, one request is queued behind it, and the client of a third hangs up meanwhile:
    its request is never searched, and the one after it is."""
    searcher = api.open_searcher(sample_index)
    release, holding, searched = threading.Event(), threading.Event(), []
    search = searcher.search

    def held_search(query, k, *args, **kwargs):
        searched.append(query)
        if query == "hold":
            holding.set()
            release.wait(60)
        return search(query, k, *args, **kwargs)

    def send(query):
        conn = http.client.HTTPConnection("127.0.0.1", p, timeout=60)
        conn.request("POST", "/search", json.dumps({"query": query, "k": 2}), {"Content-Type": "application/json"})
        return conn

    def served_meanwhile():  # /health needs no search thread: the server has read what was sent before it
        for _ in range(3):
            assert call(p, "GET", "/health")[0] == 200

    searcher.search = held_search
    body = json.dumps({"query": "cell", "k": 2}).encode()
    with running(create_app(searcher, **{**LIMITS, "workers": 1})) as p:
        searched.clear()  # the warm-up search at start
        held = queued = None
        try:
            held = send("hold")
            assert holding.wait(60)
            queued = send("life")
            served_meanwhile()
            gone = socket.create_connection(("127.0.0.1", p))
            gone.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
            served_meanwhile()
            gone.close()
            served_meanwhile()
            release.set()
            assert held.getresponse().status == 200 and queued.getresponse().status == 200
        finally:
            release.set()
            for conn in (held, queued):
                if conn is not None:
                    conn.close()
        assert call(p, "POST", "/search", {"query": "thai", "k": 2})[0] == 200
    assert searched == ["hold", "life", "thai"]
