"""Where a session's model calls go: the providers of its fallback chain and their key pools.

The chain comes from ``SessionDeps.providers`` (primary first); a runtime started without one
has a single provider made of its model settings. Each provider's keys are leased from its
pool actor (``/credentials/<provider>``); a provider without a pool actor in the tree gets a
:class:`~actors.credentials.LocalPool` kept here, which answers through the same core, by a
message to the session (never a call back in the middle of a step).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.credentials import KeySpec, ProviderSpec, pool_address
from actors.credentials._local import LocalPool
from protocols import LeaseKey, ReportKey

from ._config import load_model_settings
from ._model import ModelSettings

if TYPE_CHECKING:
    from actors.credentials._settings import ProviderChain

    from ._session_deps import SessionDeps


def with_chain(deps: SessionDeps, chain: ProviderChain) -> SessionDeps:
    """``deps`` running on ``chain``: its providers (names made unique where two differ in their
    keys), the machine's fallback order and deadlines, the stream settings of every call."""
    specs: list[ProviderSpec] = []
    for spec in chain.providers:
        same = [s for s in specs if s.name == spec.name]
        if same and any(s.keys != spec.keys for s in same):
            spec = dataclasses.replace(spec, name=f"{spec.name}#{len(same) + 1}")
        specs.append(spec)
    config = dataclasses.replace(
        deps.config, providers=tuple((s.name, s.model) for s in specs), turn_timeout=chain.turn_timeout, model_timeout=chain.request_timeout
    )
    model = dataclasses.replace(deps.model, stream=chain.stream, stream_read_timeout=chain.stream_read_timeout)
    return dataclasses.replace(deps, providers=tuple(specs), config=config, model=model)


def primary_settings(chain: ProviderChain, home: Path, env: Mapping[str, str], config: Mapping[str, Any] | None = None) -> ModelSettings:
    """The model settings of the chain's primary (prices, vision and the rest as ``model:`` says)."""
    primary = chain.primary
    route = {"model": primary.model, "provider": primary.name, "base_url": primary.base_url, "api_key": primary.keys[0].api_key if primary.keys else ""}
    return load_model_settings(home, env=env, override=route, config=config)


def pool_specs(deps: SessionDeps) -> tuple[ProviderSpec, ...]:
    """One spec per pool of the tree (a provider named twice in the chain has one pool)."""
    return tuple({spec.name: spec for spec in reversed(chain_of(deps.model, deps.providers))}.values())[::-1]


def chain_of(model: ModelSettings, providers: tuple[ProviderSpec, ...]) -> tuple[ProviderSpec, ...]:
    """The providers a session calls, primary first (one made of ``model`` when none is configured)."""
    if providers:
        return providers
    key = KeySpec(key_id="key-1", api_key=model.api_key)
    return (ProviderSpec(name=model.provider, base_url=model.base_url, model=model.model, keys=(key,), extra_headers=tuple(model.extra_headers.items())),)


class Providers:
    """One session incarnation's view of its providers: leases, reports, call settings."""

    def __init__(self, model: ModelSettings, providers: tuple[ProviderSpec, ...], registry: Any) -> None:
        self.model = model
        self.chain = chain_of(model, providers)
        self.by_name = {spec.name: spec for spec in self.chain}
        self.registry = registry
        self.local: dict[str, LocalPool] = {}

    def lease(self, provider: str, request: LeaseKey, me: Any) -> None:
        """Ask ``provider``'s pool (empty: the primary's) for a key; the answer is told to ``me``."""
        provider = provider or self.chain[0].name
        try:
            pool = pool_address(self.registry, provider)
        except LookupError:
            me.tell(self._local(provider).lease(request, time.time()))
            return
        pool.tell(request)

    def report(self, provider: str, outcome: ReportKey) -> None:
        provider = provider or self.chain[0].name
        try:
            pool = pool_address(self.registry, provider)
        except LookupError:
            self._local(provider).report(outcome, time.time())
            return
        pool.tell(outcome)

    def settings(self, index: int, model: str, api_key: str) -> ModelSettings:
        """What one call runs with: the provider's endpoint and headers, the model, the leased key."""
        spec = self.chain[min(index, len(self.chain) - 1)]
        headers = dict(spec.extra_headers) if spec.extra_headers else self.model.extra_headers
        return dataclasses.replace(self.model, model=model, base_url=spec.base_url, api_key=api_key, provider=spec.name, extra_headers=headers)

    def _local(self, provider: str) -> LocalPool:
        pool = self.local.get(provider)
        if pool is None:
            pool = self.local[provider] = LocalPool(self.by_name.get(provider) or self.chain[0])
        return pool
