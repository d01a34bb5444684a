"""The scheduler's place in the tree and its options from config.yaml (``cron:``, ``timezone:``, ``platforms:``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from supervisor import ChildSpec, Restart

from ._actor import Scheduler, SchedulerOptions
from ._delivery import Senders
from ._prerun import script_timeout

DEFAULT_MAX_PARALLEL = 3


async def post_json(url: str, body: Mapping[str, object], timeout: float) -> int:
    """POST ``body`` as JSON to ``url``; the status (webhook delivery)."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout) as client:
        response = await client.post(url, json=dict(body))
        return response.status_code


def scheduler_options(
    home: Path,
    store_file: str | os.PathLike[str],
    config: Any,
    *,
    hubs: object,
    tool_names: frozenset[str],
    publish: Any = None,
    max_iterations: int = 90,
    platform_senders: dict[str, Any] | None = None,
) -> SchedulerOptions:
    """Options from the typed config (``actors.config.HermesConfig``): ``cron.max_parallel_jobs``,
    ``cron.catch_up_missed``, ``timezone`` and the names under ``platforms:``.
    ``platform_senders`` is the gateway's table of running adapters' senders (shared, not
    copied: adapters come and go while the scheduler runs)."""
    import actors.tools as tools_package

    cron = config.cron
    return SchedulerOptions(
        store_file=store_file,
        home=home,
        max_parallel=cron.max_parallel_jobs or DEFAULT_MAX_PARALLEL,
        default_zone=config.timezone or "",
        catch_up_missed=cron.catch_up_missed,
        platforms=frozenset(config.platforms),
        hubs=hubs,
        tool_names=tool_names,
        resolve_toolsets=tools_package.resolve_toolsets,
        max_iterations=max_iterations,
        default_model=cron.model,
        script_timeout=script_timeout(os.environ),
        senders=Senders(platforms=platform_senders if platform_senders is not None else {}, publish=publish, post=post_json),
    )


def scheduler_spec(options: SchedulerOptions) -> ChildSpec:
    """``/scheduler``: put it after ``/store`` and ``/sessions`` (it writes to the one, starts the other's children)."""
    return ChildSpec(id="scheduler", actor=Scheduler, args=(options,), restart=Restart.PERMANENT, shutdown=10.0)
