"""``hermes cron``: the jobs of a running ``hermes serve``, through its ``/api/jobs`` routes.

The store has one writer, the server's; the command asks the server rather than writing the
file itself. The server is found from ``api_server:`` in config.yaml (or ``--url``), its key
from ``.env`` / the environment (``API_SERVER_KEY``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import httpx

TIMEOUT = 20.0


def _server(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    from actors.agent._config import read_config
    from actors.config._env import hermes_home, read_dotenv

    home = args.home or hermes_home(os.environ)
    section = read_config(home).get("api_server") or {}
    url = args.url or f"http://{section.get('host') or '127.0.0.1'}:{section.get('port') or 8642}"
    key = os.environ.get("API_SERVER_KEY") or read_dotenv(home / ".env").get("API_SERVER_KEY", "")
    return url.rstrip("/"), ({"Authorization": f"Bearer {key}"} if key else {})


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    names = ("schedule", "prompt", "name", "deliver", "timezone", "repeat", "model", "skills", "script")
    return {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}


def _line(job: dict[str, Any]) -> str:
    last = f"  last {job['last_status']}" if job.get("last_status") else ""
    return f"{job['id']}  {job['state']:<9}  {job['schedule_display']:<28}  next {job['next_run_at'] or '-'}  {job['name']}{last}"


def run_cron(args: argparse.Namespace) -> int:
    url, headers = _server(args)
    action = args.cron_action
    routes = {
        "list": ("GET", "/api/jobs"),
        "status": ("GET", "/api/jobs"),
        "add": ("POST", "/api/jobs"),
        "edit": ("PATCH", "/api/jobs/{id}"),
        "pause": ("POST", "/api/jobs/{id}/pause"),
        "resume": ("POST", "/api/jobs/{id}/resume"),
        "run": ("POST", "/api/jobs/{id}/run"),
        "remove": ("DELETE", "/api/jobs/{id}"),
    }
    method, path = routes[action]
    path = path.replace("{id}", getattr(args, "job_id", ""))
    body = {**_fields(args), "source": "cli"} if action in ("add", "edit") else None
    if body is not None and action == "edit":
        body.pop("source")
    try:
        response = httpx.request(method, url + path, json=body, headers=headers, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        print(f"hermes cron: no server answered at {url} ({type(exc).__name__}); start 'hermes serve' or give --url", file=sys.stderr)
        return 1
    data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
    if response.status_code >= 400:
        message = (data.get("error") or {}).get("message") if isinstance(data, dict) else None
        print(f"hermes cron: {message or response.text.strip()}", file=sys.stderr)
        return 1
    if action in ("list", "status"):
        jobs = data.get("jobs", [])
        if action == "status":
            upcoming = sorted(j["next_run_at"] for j in jobs if j.get("next_run_at"))
            states = {s: sum(j["state"] == s for j in jobs) for s in ("scheduled", "running", "paused", "finished")}
            print(f"{len(jobs)} job(s): " + ", ".join(f"{n} {s}" for s, n in states.items() if n) + f"; next run {upcoming[0] if upcoming else '-'}")
            for job in jobs:
                if job.get("last_status") in ("failed", "missed", "interrupted"):
                    print(f"  {job['id']} {job['name']}: {job['last_status']}: {job.get('last_error') or ''}")
            return 0
        print("\n".join(_line(j) for j in jobs) if jobs else "No scheduled jobs.")
        return 0
    if action == "remove":
        print(f"removed {args.job_id}")
        return 0
    print(_line(data["job"]))
    return 0
