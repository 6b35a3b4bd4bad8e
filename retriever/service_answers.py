"""The search service's answers as its ``/openapi.json`` documents them.

The routes of :mod:`retriever.service` build their JSON by hand (``search_json``, dicts) and send it as
it is: these models are attached to them as ``responses={200: {"model": ...}}``, which documents them
and nothing more: no answer is validated or encoded again on its way out. So they must say exactly
what is sent: every field, always present (null where a value may be missing, never left out), no
other field (``additionalProperties: false``). The service's tests validate real answers against the
document, and fail where a field is added, dropped or retyped on one side only.
"""

from http import HTTPStatus
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")  # documented as additionalProperties: false


class ErrorAnswer(BaseModel):
    """``{"detail": "<one line>"}``: every error the service answers (its error handlers' and middlewares')."""

    detail: str


class Hit(Answer):
    """One document found, as ``ckqti search --json`` prints it."""

    rank: int = Field(ge=1, description="1 for the best-scoring document")
    docid: str
    score: float
    title: str = Field(description="the document's title from the index's document store; empty when it has none")


class SearchAnswer(Answer):
    """One query's answer: exactly ``ckqti search --json``'s output (``retriever.results.search_json``)."""

    query: str = Field(description="the query as sent")
    terms: list[str] = Field(description="its analyzed terms that the index's vocabulary holds, searched")
    oov: list[str] = Field(description="its terms outside the index's vocabulary, skipped")
    unweighted: list[str] = Field(description="terms of `terms` that add nothing to any score (an idf of 0, say)")
    hits: list[Hit] = Field(description="at most k, best first; empty when no document scores above 0")


class UnsearchableQuery(Answer):
    """A batch's answer for a query with no searchable terms, in the place of its :class:`SearchAnswer`."""

    query: str
    error: str = Field(description="why it was not searched, one line")


class BatchAnswer(Answer):
    """``POST /search/batch``'s answer: one per query, in the order sent."""

    results: list[SearchAnswer | UnsearchableQuery]


class Health(Answer):
    """``GET /health``: the index served, how it is searched, and the request limits."""

    status: Literal["ok"]
    model: str = Field(description="the id of the model that scored the index")
    num_docs: int = Field(ge=0)
    shards: int = Field(ge=0)
    mode: Literal["exact", "anytime"]
    budget: Annotated[int, Field(ge=1)] | None = Field(description="postings an anytime search may score; null in exact mode")
    slack: Annotated[float, Field(gt=0, le=1)] | None = Field(description="the anytime mode's slack; null in exact mode")
    channel_weights: dict[str, Annotated[float, Field(ge=0)]] = Field(
        description="each channel of the index (named by its weighting) and its multiplier: 1.0 unless set, 0.0 off")
    max_k: int = Field(ge=1, description="the largest k a request may ask for")
    max_batch: int = Field(ge=1, description="the most queries in one /search/batch request")
    max_body_bytes: int = Field(ge=1, description="the largest request body taken (larger: 413)")


class Document(Answer):
    """``GET /documents/{docid}``: the document as the index's document store holds it."""

    docid: str
    title: str = Field(description="empty when it has none")
    text: str
    prefix: str = Field(description="the fields indexed before the title (ORCAS clicks, a URL); empty for most collections")


def error_answers(*statuses: int) -> dict:
    """A route's ``responses``: ``statuses`` answered ``{"detail": "<one line>"}`` (FastAPI documented a 422 as its
    own list of error objects, and no other error)."""
    return {status: {"model": ErrorAnswer, "description": HTTPStatus(status).phrase} for status in statuses}


def answers(model: type[Answer], *errors: int) -> dict:
    """A route's ``responses``: its 200 answer, ``model``, and its ``errors`` (:func:`error_answers`)."""
    return {200: {"model": model, "description": model.__doc__.split("\n")[0]}, **error_answers(*errors)}


#: The name of the API key's security scheme in a keyed service's /openapi.json.
API_KEY_SCHEME = "ApiKey"


def declare_api_key(openapi: dict, header: str) -> dict:
    """``openapi`` (an app's document) with an ``apiKey`` security scheme in ``header`` that every operation requires."""
    openapi.setdefault("components", {})["securitySchemes"] = {API_KEY_SCHEME: {
        "type": "apiKey", "in": "header", "name": header,
        "description": "the key `ckqti serve --api-key-env` was started with; a request without it gets 401"}}
    openapi["security"] = [{API_KEY_SCHEME: []}]
    return openapi
