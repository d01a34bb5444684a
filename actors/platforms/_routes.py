"""The route table of the API server."""

from __future__ import annotations

from ._app import ApiContext, Handler, health, health_detailed, models
from ._asgi import Request, Send, send_json
from ._attach import session_answer, session_cancel, session_events, session_turn
from ._chaos_api import chaos_crash
from ._chat import chat_completions
from ._compress_api import compress_session
from ._jobs_api import create_job, delete_job, get_job, list_jobs, patch_job, pause_job, resume_job, run_job
from ._openapi import openapi_document
from ._responses import create_response, delete_response, get_response
from ._runs import answer_approval, create_run, get_run, run_events, stop_run
from ._sessions_api import (
    create_session,
    delete_session,
    fork_session,
    get_session,
    list_sessions,
    patch_session,
    search_sessions,
    session_messages,
    undo_turn,
)


async def openapi(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    await send_json(send, 200, openapi_document(ROUTES, ctx.version))


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/openapi.json", openapi),
    ("GET", "/health", health),
    ("GET", "/v1/health", health),
    ("GET", "/health/detailed", health_detailed),
    ("GET", "/v1/models", models),
    ("POST", "/v1/chat/completions", chat_completions),
    ("POST", "/v1/responses", create_response),
    ("GET", "/v1/responses/{response_id}", get_response),
    ("DELETE", "/v1/responses/{response_id}", delete_response),
    ("GET", "/v1/sessions", list_sessions),
    ("POST", "/v1/sessions", create_session),
    ("GET", "/v1/sessions/search", search_sessions),
    ("GET", "/v1/sessions/{session_id}", get_session),
    ("PATCH", "/v1/sessions/{session_id}", patch_session),
    ("DELETE", "/v1/sessions/{session_id}", delete_session),
    ("GET", "/v1/sessions/{session_id}/messages", session_messages),
    ("POST", "/v1/sessions/{session_id}/fork", fork_session),
    ("POST", "/v1/sessions/{session_id}/undo", undo_turn),
    ("POST", "/v1/sessions/{session_id}/compress", compress_session),
    ("GET", "/v1/sessions/{session_id}/events", session_events),
    ("POST", "/v1/sessions/{session_id}/turns", session_turn),
    ("POST", "/v1/sessions/{session_id}/cancel", session_cancel),
    ("POST", "/v1/sessions/{session_id}/answer", session_answer),
    ("POST", "/v1/runs", create_run),
    ("GET", "/v1/runs/{run_id}", get_run),
    ("GET", "/v1/runs/{run_id}/events", run_events),
    ("POST", "/v1/runs/{run_id}/stop", stop_run),
    ("POST", "/v1/runs/{run_id}/approval", answer_approval),
    ("GET", "/api/jobs", list_jobs),
    ("POST", "/api/jobs", create_job),
    ("GET", "/api/jobs/{job_id}", get_job),
    ("PATCH", "/api/jobs/{job_id}", patch_job),
    ("DELETE", "/api/jobs/{job_id}", delete_job),
    ("POST", "/api/jobs/{job_id}/pause", pause_job),
    ("POST", "/api/jobs/{job_id}/resume", resume_job),
    ("POST", "/api/jobs/{job_id}/run", run_job),
    ("POST", "/v1/chaos/crash", chaos_crash),
]
