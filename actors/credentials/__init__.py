"""Credential pools: one actor per provider leases its API keys, benches the ones that fail,
refreshes expiring ones, and keeps cooldowns and usage in the store across restarts.

- :func:`credential_specs` builds the ``/credentials`` subtree (one :class:`CredentialPool`
  per :class:`ProviderSpec`); :func:`pool_address` finds a provider's pool. Its messages
  (``LeaseKey``, ``KeyLeased``, ``NoKeyAvailable``, ``ReportKey``, ``PoolStatusRequest``,
  ``ReloadPool``) are in ``protocols``.
- The pure core: :func:`lease`, :func:`report`, :func:`reload`, :func:`restore`,
  :func:`needs_refresh` / :func:`refreshing` / :func:`refreshed`, :func:`snapshot`, over a
  :class:`PoolState` (JSON-encodable, no secrets).
"""

from ._keys import STRATEGIES as STRATEGIES
from ._keys import KeySpec as KeySpec
from ._keys import ProviderSpec as ProviderSpec
from ._keys import Strategy as Strategy
from ._pool import CREDENTIALS_PATH as CREDENTIALS_PATH
from ._pool import CredentialPool as CredentialPool
from ._pool import PoolOptions as PoolOptions
from ._pool import ProviderCell as ProviderCell
from ._pool import credential_specs as credential_specs
from ._pool import pool_address as pool_address
from ._pool import pool_path as pool_path
from ._pool_core import LEASE_TTL as LEASE_TTL
from ._pool_core import REFRESH_RETRY as REFRESH_RETRY
from ._pool_core import SETTLED_CHUNK as SETTLED_CHUNK
from ._pool_core import SETTLED_KEEP as SETTLED_KEEP
from ._pool_core import Cooling as Cooling
from ._pool_core import Granted as Granted
from ._pool_core import KeyState as KeyState
from ._pool_core import Lease as Lease
from ._pool_core import LeaseOutcome as LeaseOutcome
from ._pool_core import Pending as Pending
from ._pool_core import PoolState as PoolState
from ._pool_core import Why as Why
from ._pool_core import bench_changed as bench_changed
from ._pool_core import decode_state as decode_state
from ._pool_core import encode_state as encode_state
from ._pool_core import lease as lease
from ._pool_core import needs_refresh as needs_refresh
from ._pool_core import refreshed as refreshed
from ._pool_core import refreshing as refreshing
from ._pool_core import reload as reload
from ._pool_core import report as report
from ._pool_core import restore as restore
from ._pool_core import settled_lease_ids as settled_lease_ids
from ._pool_core import snapshot as snapshot

__all__ = [
    "CREDENTIALS_PATH",
    "Cooling",
    "CredentialPool",
    "Granted",
    "KeySpec",
    "KeyState",
    "LEASE_TTL",
    "Lease",
    "LeaseOutcome",
    "Pending",
    "PoolOptions",
    "PoolState",
    "ProviderCell",
    "ProviderSpec",
    "REFRESH_RETRY",
    "SETTLED_CHUNK",
    "SETTLED_KEEP",
    "STRATEGIES",
    "Strategy",
    "Why",
    "bench_changed",
    "credential_specs",
    "decode_state",
    "encode_state",
    "lease",
    "needs_refresh",
    "pool_address",
    "pool_path",
    "refreshed",
    "refreshing",
    "reload",
    "report",
    "restore",
    "settled_lease_ids",
    "snapshot",
]
