"""The HTTP API (FastAPI): ``/v1``, ``/health``, the web explorer at ``/``, MCP at ``/mcp``.

Every route calls the :class:`~structrag.server.service.Service` (reads on its readers,
writes on its writer) and answers with the JSON shapes the CLI prints with ``--json``.
Errors are JSON: ``{"error": {"code", "message", "hint", "position"}}``, with the status
the error calls for (400 a bad query or argument, 401 no valid token, 403 outside the
token's scope, 404 not found, 409 the index's state, 413 too large, 422 a body that is
not valid JSON or does not fit its schema, 500 the server's own, with the request id,
503 shutting down).

ASGI layers wrap the routes, outermost first: the request log (one JSON line per
request, and the 500 of an error no route answered), the loopback check of an open
server, the body limit (413 before the body is read, or as soon as it grows past the
limit), the agent's segment (a name holding ``/`` comes percent-encoded), and the token
check (401, or 403 for a path outside the token's scope: anything but
``/v1/agents/{agent}/...`` of its own agents needs a token granted the whole index, so a
route added later is closed to scoped tokens until it says otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from structrag import __version__
from structrag.errors import (
    ConfigError,
    IndexStateError,
    InputError,
    LLMError,
    MemoryInputError,
    NotFoundError,
    QueryError,
    QuerySyntaxError,
    StructragError,
)
from structrag.index import IngestOptions
from structrag.server import schemas as s
from structrag.server.auth import OPEN, AccessDenied, Grant, NotAuthenticated, Tokens
from structrag.server.service import (
    UPLOAD_PREFIX,
    BatchItemError,
    JobCancelled,
    ServerClosing,
    Service,
    ShownError,
    error_dict,
)

STATIC = Path(__file__).parent / "static"
#: Bodies larger than this are refused with 413 (uploads have their own limit).
MAX_BODY = 1 << 20
MAX_UPLOAD = 512 << 20
UPLOAD_PATH = "/v1/ingest/upload"
#: An upload's form fields: the files, and the options of a JSON ingest (but paths, exclude).
UPLOAD_FIELDS = frozenset({"files", *s.IngestIn.model_fields} - {"paths", "exclude"})
access_log = logging.getLogger("structrag.server.access")
log = logging.getLogger("structrag.server")

_STATUS: list[tuple[type[StructragError], int]] = [
    (NotAuthenticated, 401),
    (AccessDenied, 403),
    (NotFoundError, 404),
    (ServerClosing, 503),
    (JobCancelled, 409),
    (IndexStateError, 409),
    (LLMError, 502),
    (QuerySyntaxError, 400),
    (QueryError, 400),
    (InputError, 400),
    (ConfigError, 400),
    (MemoryInputError, 400),
]


def status_of(exc: StructragError) -> int:
    if isinstance(exc, BatchItemError | ShownError):
        return status_of(exc.cause)
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 400)


def error_response(status: int, error: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"error": error}, status_code=status)


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorOut, "description": what}
    for code, what in (
        (400, "A query, question or argument that cannot work"),
        (401, "No valid token"),
        (403, "Outside the token's scope"),
        (404, "Not found"),
        (409, "The index's state forbids it now (opened read-only, a job cancelled)"),
        (413, "Body too large"),
        (421, "A Host header other than the server's own (loopback protection)"),
        (422, "A body that is not valid JSON or does not fit its schema"),
        (500, "An internal error (logged with the request id)"),
        (502, "The LLM endpoint failed"),
        (503, "The server is closing"),
    )
}


def create_app(
    service: Service,
    *,
    tokens: Tokens | None = None,
    host: str = "127.0.0.1",
    max_body: int = MAX_BODY,
    max_upload: int = MAX_UPLOAD,
    mcp: bool = True,
) -> FastAPI:
    """The API, the explorer and (with ``mcp``) the MCP endpoint, on ``service``."""
    tokens = tokens or Tokens()
    mcp_server = None
    if mcp:
        from structrag.server.mcp_tools import build_mcp

        mcp_server = build_mcp(service, tokens)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    app = FastAPI(
        title="structrag",
        version=__version__,
        summary="Structured RAG over conversations: the index, ask, and agent memory.",
        docs_url=None,  # the explorer is the UI; Swagger's page would load from a CDN
        redoc_url=None,
        lifespan=lifespan,
        responses=ERRORS,
    )
    _errors(app)
    _routes(app, service)
    if mcp_server is not None:

        @app.get("/mcp", include_in_schema=False)
        def no_stream() -> JSONResponse:
            """The endpoint is stateless and answers each POST with JSON: there is no
            stream for the server's own messages to open (405, as MCP's transport
            prescribes; the SDK would hold an SSE stream open that nothing writes to)."""
            answer = error_response(
                405,
                {
                    "code": "method_not_allowed",
                    "message": "GET /mcp: this MCP endpoint is stateless and answers each "
                    "POST with JSON; it opens no event stream",
                    "hint": "send JSON-RPC requests with POST /mcp",
                },
            )
            answer.headers["allow"] = "POST"
            return answer

        http = mcp_server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
        )
        app.router.routes.extend(r for r in http.routes if getattr(r, "path", "") == "/mcp")
    app.add_middleware(TokenCheck, tokens=tokens)
    app.add_middleware(AgentSegment)
    app.add_middleware(BodyLimit, max_body=max_body, max_upload=max_upload)
    if not tokens.required:
        app.add_middleware(LoopbackHost)
    app.add_middleware(AccessLog, tokens=tokens)
    return app


# -- errors ---------------------------------------------------------------------------------


def _errors(app: FastAPI) -> None:
    @app.exception_handler(StructragError)
    async def structrag_error(request: Request, exc: StructragError) -> JSONResponse:
        return error_response(status_of(exc), error_dict(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, _validation_error(exc, request.headers.get("content-type")))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cause = exc.__cause__
        if isinstance(cause, UnicodeDecodeError):  # FastAPI's "error parsing the body"
            return error_response(  # as any body that is not JSON: 422 invalid_json
                422,
                {
                    "code": "invalid_json",
                    "message": f"the body is not UTF-8 text: byte 0x{cause.object[cause.start]:02x}"
                    f" at position {cause.start}",
                    "hint": "send JSON encoded as UTF-8 with Content-Type: application/json",
                    "position": cause.start,
                },
            )
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        hint = None
        if exc.status_code == 404 and request.url.path.startswith("/v1/agents/"):
            hint = (
                "an agent's routes are /v1/agents/{agent}/memories, .../context, .../facts, "
                "...; an agent name holding '/' goes percent-encoded (team%2Fbot)"
            )
        return error_response(
            exc.status_code, {"code": code, "message": str(exc.detail), "hint": hint}
        )


def _validation_error(
    exc: RequestValidationError, content_type: str | None = None
) -> dict[str, Any]:
    """A body that is not JSON (with the offset, line and column it broke at), a body not
    read as JSON for want of its Content-Type, or fields that do not fit the schema (each
    named by its path)."""
    errors = exc.errors()
    media = (content_type or "").split(";")[0].strip().lower()
    if (
        len(errors) == 1
        and tuple(errors[0].get("loc", ())) == ("body",)
        and errors[0].get("type") in ("model_attributes_type", "dict_type")
        and not (media == "application/json" or media.endswith("+json"))
    ):
        shown = f"Content-Type {media}" if media else "no Content-Type"
        return {
            "code": "invalid_request",
            "message": f"body: the body was not read as JSON: the request has {shown}",
            "hint": "send the JSON object with the header Content-Type: application/json "
            "(curl -H 'content-type: application/json')",
            "position": None,
        }
    for error in errors:
        if error.get("type") == "json_invalid":
            offset = error["loc"][-1] if isinstance(error["loc"][-1], int) else 0
            body = exc.body if isinstance(exc.body, str | bytes) else b""
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            line = text.count("\n", 0, offset) + 1
            column = offset - (text.rfind("\n", 0, offset) + 1) + 1
            why = (error.get("ctx") or {}).get("error", "not JSON")
            return {
                "code": "invalid_json",
                "message": f"the body is not valid JSON: {why} at line {line}, column {column}",
                "hint": "send a JSON object with Content-Type: application/json",
                "position": offset,
            }
    parts = []
    for error in errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
    first = errors[0].get("loc", ()) if errors else ()
    return {
        "code": "invalid_request",
        "message": "; ".join(parts),
        "hint": "see /openapi.json for the request's schema",
        "position": ".".join(str(p) for p in first if p != "body") or None,
    }


# -- routes -----------------------------------------------------------------------------


def grant_of(request: Request) -> Grant:
    grant = getattr(request.state, "grant", None)
    return grant if isinstance(grant, Grant) else OPEN


def agent_scope(agent: str, request: Request) -> str:
    """The path's agent, checked against the token (the token check did so already by
    the path; this says it again where the route is defined). The segment comes as the
    client encoded it (see :class:`AgentSegment`): decoded here."""
    agent = unquote(agent)
    grant_of(request).require_agent(agent)
    return agent


Agent = Annotated[str, Depends(agent_scope)]


def _routes(app: FastAPI, service: Service) -> None:
    @app.get("/health", response_model=s.HealthOut, tags=["server"])
    def health() -> dict[str, Any]:
        """Whether the server is up (no token needed; says nothing about the index)."""
        return {
            "status": "closing" if service.closing else "ok",
            "version": __version__,
            "instance": service.instance,
            "uptime_s": round(service.uptime, 1),
        }

    # -- the index -----------------------------------------------------------------------

    @app.get("/v1/stats", response_model=s.StatsOut, tags=["index"])
    def stats() -> dict[str, Any]:
        """Counts of conversations, messages and knowledge (``structrag stats``)."""
        return service.stats()

    @app.get("/v1/conversations", response_model=list[s.ConversationOut], tags=["index"])
    def conversations() -> list[dict[str, Any]]:
        """Conversations: ids, message counts, dates, speakers."""
        return service.conversations()

    @app.get(
        "/v1/conversations/{conversation:path}/messages",
        response_model=s.MessagePageOut,
        tags=["index"],
    )
    def messages(
        conversation: str,
        offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        around: Annotated[str | None, Query(description="A message id: its page.")] = None,
    ) -> dict[str, Any]:
        """A page of a conversation's messages, each with its knowledge and spans."""
        return service.messages(conversation, offset=offset, limit=limit, around=around)

    @app.delete(
        "/v1/conversations/{conversation:path}", response_model=s.RemovedOut, tags=["index"]
    )
    def remove_conversation(conversation: str) -> dict[str, Any]:
        """Delete an ingested conversation, its messages and everything extracted from them
        (``structrag remove``); ``removed`` is how many messages went."""
        return service.remove_conversation(conversation)

    @app.get("/v1/messages/{message_id:path}", response_model=s.MessageOut, tags=["index"])
    def show(message_id: str, conversation: str | None = None) -> dict[str, Any]:
        """A message and its knowledge with spans (``structrag show``)."""
        return service.show(message_id, conversation)

    @app.get("/v1/entities", response_model=list[s.EntityOut], tags=["index"])
    def entities(
        top: Annotated[int, Query(ge=1, le=10_000)] = 20, conversation: str | None = None
    ) -> list[dict[str, Any]]:
        """The most mentioned entities (``structrag entities``)."""
        return service.entities(top, conversation)

    @app.get("/v1/entities/{name:path}", response_model=s.EntityPageOut, tags=["index"])
    def entity(name: str, conversation: str | None = None) -> dict[str, Any]:
        """An entity: mentions over time, related entities, actions."""
        return service.entity(name, conversation)

    @app.get("/v1/topics", response_model=list[s.TopicOut], tags=["index"])
    def topics(
        top: Annotated[int, Query(ge=1, le=10_000)] = 20, conversation: str | None = None
    ) -> list[dict[str, Any]]:
        """The most mentioned topics (``structrag topics``)."""
        return service.topics(top, conversation)

    @app.post(
        "/v1/query", response_model=s.QueryOut, tags=["ask"], response_model_exclude_unset=True
    )
    def query(body: s.QueryIn) -> dict[str, Any]:
        """Run a query expression (``structrag query``); a syntax error is a 400 whose
        message keeps the caret under the position."""
        return service.query(
            body.expression, conversation=body.conversation, limit=body.limit, explain=body.explain
        )

    @app.post("/v1/ask", response_model=s.AskOut, tags=["ask"], response_model_exclude_unset=True)
    def ask(body: s.AskIn) -> dict[str, Any]:
        """Answer context for a question within a token budget (``structrag ask``)."""
        return service.ask(body.question, **body.model_dump(exclude={"question"}))

    @app.post(
        "/v1/ask/batch",
        response_model=s.AskBatchOut,
        tags=["ask"],
        response_model_exclude_unset=True,
    )
    def ask_batch(body: s.AskBatchIn) -> dict[str, Any]:
        """Many questions, answered in order (``structrag ask --batch``); the first that
        fails stops the batch, and its index is the error's ``position``."""
        answers = service.ask_batch(
            [q.model_dump() for q in body.questions],
            explain=body.explain,
            conversation=body.conversation,
            budget=body.budget,
            encoding=body.encoding,
            sources=body.sources,
        )
        return {"answers": answers}

    @app.get("/v1/agents", response_model=list[s.AgentOut], tags=["memory"])
    def agents() -> list[dict[str, Any]]:
        """The agents that have memories, with counts per memory table."""
        return service.agents()

    # -- ingest jobs -----------------------------------------------------------------------

    @app.post("/v1/ingest", response_model=s.JobOut, status_code=202, tags=["ingest"])
    def ingest(body: s.IngestIn, response: Response) -> dict[str, Any]:
        """Ingest files or folders on the server's machine, as a background job (poll
        ``/v1/jobs/{id}``). Every input is checked before anything is written; each file
        is one transaction."""
        job = service.start_ingest(body.paths, _ingest_options(body))
        response.headers["Location"] = f"/v1/jobs/{job.id}"
        return job.as_dict()

    @app.post("/v1/ingest/estimate", tags=["ingest"])
    def estimate(body: s.IngestIn) -> dict[str, Any]:
        """A dry run of an ingest (``structrag ingest --dry-run``): what would be extracted,
        and, for an LLM, the calls and tokens it would take. Writes nothing."""
        return service.estimate(body.paths, _ingest_options(body))

    @app.post(UPLOAD_PATH, response_model=s.JobOut, status_code=202, tags=["ingest"])
    async def upload(
        request: Request,
        response: Response,
        files: Annotated[list[UploadFile], File(description="The files to ingest.")],
        format: Annotated[str | None, Form()] = None,
        conversation: Annotated[str | None, Form()] = None,
        encoding: Annotated[str, Form()] = "utf-8",
        date_order: Annotated[Literal["dmy", "mdy"] | None, Form()] = None,
        extractor: Annotated[Literal["spacy", "llm", "hybrid"], Form()] = "spacy",
        ner: Annotated[bool, Form()] = False,
        embeddings: Annotated[Literal["static", "minilm", "none"] | None, Form()] = None,
        workers: Annotated[int, Form(ge=1, le=16)] = 1,
        force: Annotated[bool, Form()] = False,
    ) -> dict[str, Any]:
        """Upload files and ingest them as a background job (``curl -F files=@chat.jsonl``);
        the other form fields are the options of ``/v1/ingest`` (an unknown one is a 422).
        A client that goes away before the upload ends leaves no job and no trace."""
        unknown = sorted(set((await request.form()).keys()) - UPLOAD_FIELDS)
        if unknown:
            raise RequestValidationError(
                [
                    {
                        "type": "extra_forbidden",
                        "loc": ("body", name),
                        "msg": "not a field of an upload (Extra inputs are not permitted)",
                        "input": None,
                    }
                    for name in unknown
                ]
            )
        options = _ingest_options(
            s.IngestIn(
                paths=["upload"],
                format=format,
                conversation=conversation,
                encoding=encoding,
                date_order=date_order,
                extractor=extractor,
                ner=ner,
                embeddings=embeddings,
                workers=workers,
                force=force,
            )
        )
        folder = Path(tempfile.mkdtemp(prefix=UPLOAD_PREFIX))
        names: dict[str, str] = {}
        paths: list[Path] = []
        try:
            for number, upload in enumerate(files):
                name = _safe_name(upload.filename or f"upload-{number}")
                target = folder / str(number) / name
                target.parent.mkdir()
                with target.open("wb") as handle:
                    while chunk := await upload.read(1 << 20):
                        handle.write(chunk)
                names[str(target)] = name
                paths.append(target)
            # The inputs' check reads them: off the event loop.
            job = await run_in_threadpool(
                service.start_ingest, paths, options, names=names, uploads=folder
            )
        except BaseException:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            raise
        response.headers["Location"] = f"/v1/jobs/{job.id}"
        return job.as_dict()

    @app.get("/v1/jobs", response_model=list[s.JobOut], tags=["ingest"])
    def jobs() -> list[dict[str, Any]]:
        """Ingest jobs since the server started, oldest first."""
        return [j.as_dict() for j in service.jobs()]

    @app.get("/v1/jobs/{job_id}", response_model=s.JobOut, tags=["ingest"])
    def job(job_id: str) -> dict[str, Any]:
        """A job's state and progress (messages and files done of all)."""
        return service.job(job_id).as_dict()

    @app.post("/v1/jobs/{job_id}/cancel", response_model=s.JobOut, tags=["ingest"])
    def cancel(job_id: str) -> dict[str, Any]:
        """Cancel a job: the file being written rolls back; files done before it stay."""
        return service.cancel_job(job_id).as_dict()

    # -- an agent's memory -------------------------------------------------------------

    memory = "/v1/agents/{agent}"

    @app.post(
        f"{memory}/memories",
        response_model=s.AddedOut,
        status_code=201,
        tags=["memory"],
        responses={200: {"model": s.AddedOut, "description": "With `unique`: stored already"}},
    )
    def add_memory(agent: Agent, body: s.MemoryIn, response: Response) -> dict[str, Any]:
        """Store a memory; it is extracted and searchable when this returns. With
        ``unique``, an exact duplicate already stored is returned instead (200, with
        ``duplicate`` true: nothing was stored, the other fields were not applied)."""
        fields = body.model_dump(exclude={"text"})
        fields["timestamp"] = naive_utc(body.timestamp)
        added = service.add_memory(agent, body.text, **fields)
        if added["duplicate"]:
            response.status_code = 200
        return added

    @app.get(f"{memory}/memories", response_model=list[s.MemoryOut], tags=["memory"])
    def recent(
        agent: Agent,
        room: str | None = None,
        table: s.Table = "messages",
        count: Annotated[int, Query(ge=1, le=1000)] = 20,
        start: datetime | None = None,
        end: datetime | None = None,
        user: str | None = None,
    ) -> list[dict[str, Any]]:
        """The newest memories, newest first."""
        return service.recent_memories(
            agent,
            room=room,
            count=count,
            table=table,
            start=naive_utc(start),
            end=naive_utc(end),
            user=user,
        )

    @app.post(f"{memory}/memories/search", response_model=list[s.HitOut], tags=["memory"])
    def search(agent: Agent, body: s.SearchIn) -> list[dict[str, Any]]:
        """The memories that best answer the query, best first."""
        fields = body.model_dump(exclude={"query"})
        fields.update(start=naive_utc(body.start), end=naive_utc(body.end))
        return service.search_memories(agent, body.query, **fields)

    @app.get(f"{memory}/memories/count", response_model=s.CountOut, tags=["memory"])
    def count(
        agent: Agent, room: str | None = None, table: s.Table | None = None
    ) -> dict[str, Any]:
        """How many memories (of a room, of a table)."""
        return service.count_memories(agent, room, table)

    @app.get(f"{memory}/memories/{{memory_id:path}}", response_model=s.MemoryOut, tags=["memory"])
    def get_memory(agent: Agent, memory_id: str, room: str | None = None) -> dict[str, Any]:
        """One memory by id (counts as a read); ``room`` where two rooms have the id."""
        return service.get_memory(agent, memory_id, room)

    @app.patch(f"{memory}/memories/{{memory_id:path}}", response_model=s.MemoryOut, tags=["memory"])
    def update(
        agent: Agent, memory_id: str, body: s.MemoryUpdate, room: str | None = None
    ) -> dict[str, Any]:
        """Change a memory's status (a goal's), importance or metadata; the text stays."""
        return service.update_memory(agent, memory_id, room, **body.model_dump())

    @app.delete(
        f"{memory}/memories/{{memory_id:path}}", response_model=s.RemovedOut, tags=["memory"]
    )
    def remove(agent: Agent, memory_id: str, room: str | None = None) -> dict[str, Any]:
        """Delete a memory and everything derived from it alone (``room`` where two rooms
        have the id)."""
        return service.remove_memory(agent, memory_id, room)

    @app.delete(f"{memory}/memories", response_model=s.RemovedOut, tags=["memory"])
    def remove_all(
        agent: Agent,
        all: Annotated[bool, Query(description="Must be true: deletes many.")] = False,
        room: str | None = None,
        table: s.Table | None = None,
    ) -> dict[str, Any]:
        """Delete every memory (of a room, of a table); needs ``all=true``."""
        if not all:
            raise MemoryInputError(
                "deleting many memories needs all=true",
                hint="DELETE .../memories?all=true&room=ROOM (or one by id)",
            )
        return service.remove_memories(agent, room, table)

    @app.post(f"{memory}/memories/prune", response_model=s.PruneOut, tags=["memory"])
    def prune(agent: Agent, body: s.PruneIn) -> dict[str, Any]:
        """Delete old memories that are neither important nor often read (a dry run
        unless ``apply``)."""
        return service.prune(
            agent,
            body.older_than,
            apply=body.apply,
            keep_if_accessed_more_than=body.keep_if_accessed_more_than,
            keep_importance=body.keep_importance,
            room=body.room,
            table=body.table,
        )

    @app.post(f"{memory}/context", response_model=s.ContextOut, tags=["memory"])
    def context(agent: Agent, body: s.ContextIn) -> dict[str, Any]:
        """What the agent puts in its prompt before answering a message, within a budget."""
        return service.context(agent, body.message, **body.model_dump(exclude={"message"}))

    @app.get(f"{memory}/facts", response_model=list[s.FactOut], tags=["memory"])
    def facts(
        agent: Agent, user: str | None = None, room: str | None = None, history: bool = False
    ) -> Any:
        """Facts and relationships that still hold, each with where it comes from
        (``history``: superseded ones too, with status ``superseded``)."""
        return service.facts(agent, user, room, history=history)

    @app.get(f"{memory}/profile", response_model=list[s.ProfileEntryOut], tags=["memory"])
    def profile(agent: Agent, user: str, history: bool = False) -> Any:
        """What the agent knows about a user (``history``: superseded entries too)."""
        return service.profile(agent, user, history=history)

    @app.post(f"{memory}/compact", response_model=s.CompactOut, tags=["memory"])
    def compact(agent: Agent, body: s.CompactIn) -> dict[str, Any]:
        """Summarise a room's older messages and record observations."""
        return service.compact(agent, body.room, body.keep_recent)

    # -- the explorer ----------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def explorer() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")


def naive_utc(moment: datetime | None) -> datetime | None:
    """A time as memories store them: naive UTC (``...Z`` and ``+02:00`` converted; a
    time without a zone is taken as UTC already)."""
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _ingest_options(body: s.IngestIn) -> IngestOptions:
    """The body's options (IngestIn's fields are IngestOptions', plus the paths)."""
    values = body.model_dump(exclude={"paths"})
    values["exclude"] = tuple(values["exclude"])
    return IngestOptions.of(None, values)


_UNSAFE = re.compile(r"[^\w.\- ]+")


def _safe_name(name: str) -> str:
    """An uploaded file's name, without folders or odd characters (it names the
    conversation for some formats, so the rest of it is kept)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip().lstrip(".")
    return _UNSAFE.sub("_", base)[:200] or "upload"


# -- ASGI layers --------------------------------------------------------------------------


async def _send_error(
    send: Send, status: int, error: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps({"error": error}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class LoopbackHost:
    """An open server (no token, so bound to loopback) answers only requests addressed to
    a loopback name: a web page whose domain an attacker points at 127.0.0.1 (DNS
    rebinding) gets 421, not the index. And it takes a change (any method but GET and
    HEAD) only from its own pages or from clients that are not browsers: a web page
    elsewhere can send a form to 127.0.0.1 without asking (an upload, a cancel), so a
    request whose browser says it comes from another origin gets 403."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.lower(): v.decode("latin-1") for k, v in scope["headers"]}
            host = headers.get(b"host", "")
            if scope.get("method") not in ("GET", "HEAD") and _cross_origin(headers, host):
                await _send_error(
                    send,
                    403,
                    {
                        "code": "cross_origin",
                        "message": "a page from another origin cannot change this server "
                        f"(origin {headers.get(b'origin', '?')!r})",
                        "hint": "use the explorer this server serves, the CLI or a client "
                        "that is not a browser; or run the server with tokens (--token)",
                    },
                )
                return
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.strip("[]").lower() not in ("127.0.0.1", "localhost", "::1"):
                await _send_error(
                    send,
                    421,
                    {
                        "code": "bad_host",
                        "message": f"this server answers requests to 127.0.0.1 or localhost, "
                        f"not {host!r}",
                        "hint": "a server reachable by other names needs tokens (--token)",
                    },
                )
                return
        await self.app(scope, receive, send)


def _cross_origin(headers: dict[bytes, str], host: str) -> bool:
    """Whether a browser says the request comes from a page of another origin than this
    server's (``Origin``, or ``Sec-Fetch-Site``). Clients that are not browsers send
    neither."""
    site = headers.get(b"sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return True
    origin = headers.get(b"origin")
    if origin is None:
        return False
    return origin == "null" or origin.partition("://")[2].rstrip("/").lower() != host.lower()


class AgentSegment:
    """An agent's name is one segment of ``/v1/agents/{agent}/...``, so a name holding
    ``/`` (``team/bot``, which ``add_memory`` takes) comes percent-encoded
    (``team%2Fbot``). The HTTP server decodes the path before the routes see it, which
    would cut such a name in two; here the agent's segment is put back as the client
    sent it (``raw_path``), the rest of the path stays decoded, and the routes decode
    the name (:func:`agent_scope`). Unambiguous: the name is exactly one raw segment,
    while a memory's id after it may still hold ``/``, encoded or not."""

    PREFIX = "/v1/agents/"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})  # shared with the copy: the log reads the grant
            scope = self.rewritten(scope)
        await self.app(scope, receive, send)

    @classmethod
    def rewritten(cls, scope: Scope) -> Scope:
        path, raw = scope.get("path", ""), scope.get("raw_path")
        prefix = cls.PREFIX.encode()
        if not (isinstance(raw, bytes) and raw.startswith(prefix) and path.startswith(cls.PREFIX)):
            return scope
        segment, slash, _ = raw[len(prefix) :].partition(b"/")
        if b"%" not in segment or not slash:
            return scope  # decoding changed nothing in it, or it ends the path
        encoded = segment.decode("latin-1")
        decoded = cls.PREFIX + unquote(encoded) + "/"
        if not path.startswith(decoded):
            return scope
        return {**scope, "path": cls.PREFIX + encoded + "/" + path[len(decoded) :]}


class TokenCheck:
    """401 without a valid token; 403 for a path outside the token's scope. The grant goes
    into the request's state for the routes and the MCP tools."""

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(("/v1", "/mcp")):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            grant = self.tokens.resolve(headers.get("authorization"))
            _check_path(grant, path)
        except (NotAuthenticated, AccessDenied) as exc:
            status = status_of(exc)
            # a 401 says how to authenticate (RFC 9110): a bearer token
            challenge = (
                [(b"www-authenticate", b'Bearer realm="structrag"')] if status == 401 else []
            )
            await _send_error(send, status, error_dict(exc), challenge)
            return
        scope.setdefault("state", {})["grant"] = grant
        await self.app(scope, receive, send)


def _check_path(grant: Grant, path: str) -> None:
    """Agent routes need the agent in the grant; every other ``/v1`` route needs the whole
    index; ``/mcp`` checks each tool call."""
    if grant.whole_index or path.startswith("/mcp"):
        return
    parts = path.split("/")
    if len(parts) >= 5 and parts[1] == "v1" and parts[2] == "agents" and parts[3]:
        grant.require_agent(unquote(parts[3]))
        return
    grant.require_index()


class BodyLimit:
    """413 for a body over the limit: at once by its Content-Length, or as soon as the
    bytes read pass the limit."""

    def __init__(self, app: ASGIApp, max_body: int, max_upload: int) -> None:
        self.app = app
        self.max_body = max_body
        self.max_upload = max_upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("path") == UPLOAD_PATH
        limit = self.max_upload if upload else self.max_body
        for key, value in scope["headers"]:
            if key.lower() == b"content-length" and value.isdigit() and int(value) > limit:
                await _send_error(send, 413, _too_large(limit, upload=upload))
                return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await _send_error(send, 413, _too_large(limit, upload=upload))


class _BodyTooLarge(BaseException):
    """Raised from ``receive`` past the limit. A BaseException, so that the body parsing
    of the routes (which turns an Exception into a 400) lets it through to
    :class:`BodyLimit`."""


def _too_large(limit: int, *, upload: bool) -> dict[str, Any]:
    where = (
        "the server's --max-upload is the limit of uploads"
        if upload
        else "uploads to /v1/ingest/upload have a higher limit, --max-upload"
    )
    return {
        "code": "body_too_large",
        "message": f"the request body is over the limit of {limit:,} bytes",
        "hint": f"send less ({where}), or pass a path on the server with /v1/ingest",
    }


class AccessLog:
    """One JSON line per request on the ``structrag.server.access`` logger: time, id,
    method, path, status, milliseconds, bytes sent, client, and who (a token's
    fingerprint, or ``open``). Query strings are left out: they can hold memories.

    Every answer carries its request id (``x-request-id``). An error no route turned into
    an answer is a 500 answered here, with the request id in its body as well, and the
    traceback goes to the server's log under that id: not in an exception handler, which
    FastAPI runs for ``Exception`` in Starlette's outermost layer, outside this one. A
    request cancelled before its answer started (the server stopped after its grace) gets
    a JSON 503, never the HTTP server's plain-text 500.

    ``who`` is said of every request: the grant the token check found, or else (a path
    that needs no token, a request refused before the check) the sent token's
    fingerprint, ``open`` on a server without tokens, or ``anonymous`` (no valid token).
    """

    def __init__(self, app: ASGIApp, tokens: Tokens | None = None) -> None:
        self.app = app
        self.tokens = tokens or Tokens()

    def who(self, scope: Scope) -> str:
        grant = scope.get("state", {}).get("grant")
        if isinstance(grant, Grant):
            return grant.name
        if not self.tokens.required:
            return OPEN.name
        sent = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), None)
        try:
            return self.tokens.resolve(sent.decode("latin-1") if sent else None).name
        except NotAuthenticated:
            return "anonymous"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = secrets.token_hex(6)
        status = 500
        sent = 0
        answering = False  # the answer has started

        async def logging_send(message: Message) -> None:
            nonlocal status, sent, answering
            if message["type"] == "http.response.start":
                status = int(message["status"])
                answering = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, logging_send)
        except Exception:
            log.exception(
                "internal error on %s %s (request %s)",
                scope.get("method"),
                scope.get("path"),
                request_id,
            )
            if not answering:  # once the answer has started, it can only end
                await _send_error(
                    logging_send,
                    500,
                    {
                        "code": "internal",
                        "message": "internal error; the server's log has it under request "
                        f"id {request_id}",
                        "hint": "report it with the request id",
                        "request_id": request_id,
                    },
                )
            status = 500
        except asyncio.CancelledError:
            # The server stopped waiting for this request (its --grace ran out): say so in
            # JSON if nothing was sent yet; an answer under way can only be cut off.
            log.warning(
                "%s %s (request %s) cut off: the server stopped before it was answered",
                scope.get("method"),
                scope.get("path"),
                request_id,
            )
            if answering:
                raise  # cut off: the client sees fewer bytes than the answer's length
            # A write may still finish after this (its thread runs on, and the server
            # closes only once its writes are done): its outcome is unknown here.
            reads = scope.get("method") in ("GET", "HEAD")
            with contextlib.suppress(Exception):
                await _send_error(
                    logging_send,
                    503,
                    {
                        "code": "server_closing",
                        "message": "the server stopped before the request was answered",
                        "hint": "send it again once the server is back"
                        + (
                            ""
                            if reads
                            else "; a write (a memory, an ingest, a removal) may have been "
                            "done before it stopped: look (list, count, get by id) before "
                            "sending that again"
                        )
                        + " (its --grace bounds how long it waits for requests when stopping)",
                        "request_id": request_id,
                    },
                    [(b"connection", b"close")],
                )
            status = 503
        finally:
            client = scope.get("client")
            access_log.info(
                json.dumps(
                    {
                        "ts": datetime.now().isoformat(timespec="milliseconds"),
                        "id": request_id,
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                        "bytes": sent,
                        "client": f"{client[0]}:{client[1]}" if client else None,
                        "who": self.who(scope),
                    }
                )
            )
