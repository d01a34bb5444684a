"""A provider's pool kept by its one user: the pure core without an actor or a store.

A session of a runtime started without ``/credentials`` (a test's bare ``SessionDeps``) and
the simulator's session lease their keys here, through the same decisions as the pool actor:
a failed key is benched, a rate limit is waited out, usage is counted once per lease.
Nothing is saved: the state lives as long as its owner.
"""

from __future__ import annotations

from protocols import KeyLeased, LeaseKey, NoKeyAvailable, ReportKey

from ._keys import ProviderSpec
from ._pool_core import Cooling, Granted, PoolState, lease, report, restore


class LocalPool:
    """One provider's keys, leased and benched in memory."""

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.state, self._secrets = _fresh(spec)

    def lease(self, request: LeaseKey, now: float) -> KeyLeased | NoKeyAvailable:
        """The answer the pool actor would give ``request`` at unix time ``now``."""
        self.state, outcome = lease(self.state, self.spec, request.lease_id, now)
        name = self.spec.name
        if type(outcome) is Granted:  # by exact type (outcomes are final structs): every model call leases
            api_key, shown = self._secrets[outcome.key_id]
            return KeyLeased(lease_id=request.lease_id, provider=name, key_id=outcome.key_id, api_key=api_key, shown=shown)
        if type(outcome) is Cooling:
            return NoKeyAvailable(lease_id=request.lease_id, provider=name, until=outcome.until, reason=outcome.why, kind=outcome.kind)
        # a refresh runs: no refresh command runs here, so no key is stale
        return NoKeyAvailable(lease_id=request.lease_id, provider=name, until=now, reason=f"{name}: a key is being refreshed", kind="rate_limit")

    def report(self, outcome: ReportKey, now: float) -> None:
        self.state = report(self.state, self.spec, outcome, now)


_FRESH: dict[int, tuple[ProviderSpec, PoolState, dict[str, tuple[str, str]]]] = {}
"""id(spec) -> (spec, the state a new pool of it starts from, its keys' secrets by key id): the
simulator starts one pool per seed. Sharing them is safe: a state is never changed in place
(every change makes a new one), and the secrets are only read."""


def _fresh(spec: ProviderSpec) -> tuple[PoolState, dict[str, tuple[str, str]]]:
    known = _FRESH.get(id(spec))
    if known is not None and known[0] is spec:
        return known[1], known[2]
    if len(_FRESH) >= 64:
        _FRESH.clear()
    state = restore(None, spec)
    secrets = {key.key_id: (key.api_key, key.shown) for key in spec.keys}
    _FRESH[id(spec)] = (spec, state, secrets)
    return state, secrets
