"""The actor runtime kernel: actors, stable addresses, the reactor, subprocess groups.

Subpackages (``agent``, ``tools``, ``platforms``, ``memory``) build on this kernel; the
kernel imports nothing from them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._actor import Actor as Actor
    from ._actor import ActorContext as ActorContext
    from ._address import ActorPath as ActorPath
    from ._address import Address as Address
    from ._address import AddressStatistics as AddressStatistics
    from ._address import Registry as Registry
    from ._errors import ActorCrashed as ActorCrashed
    from ._errors import AddressClosed as AddressClosed
    from ._errors import DeliveryError as DeliveryError
    from ._errors import HermesError as HermesError
    from ._errors import MailboxOverflow as MailboxOverflow
    from ._errors import ReactorStopped as ReactorStopped
    from ._errors import RuntimeStopped as RuntimeStopped
    from ._errors import StartFailed as StartFailed
    from ._errors import UsageError as UsageError
    from ._groups import GroupRecord as GroupRecord
    from ._groups import claim_group_ledger as claim_group_ledger
    from ._groups import reap_orphan_groups as reap_orphan_groups
    from ._groups import use_group_ledger as use_group_ledger
    from ._process import kill_group as kill_group
    from ._process import run_process as run_process
    from ._reactor import Reactor as Reactor
    from ._reactor import ReactorStatistics as ReactorStatistics
    from ._reactor import WaitHandle as WaitHandle
    from ._signals import SignalStop as SignalStop

# Names load on first use, so that the ``hermes`` command starts without importing the
# kernel (trio, pykka) for ``--help``.
_LAZY: dict[str, str] = {
    "Actor": "._actor",
    "ActorContext": "._actor",
    "ActorCrashed": "._errors",
    "ActorPath": "._address",
    "Address": "._address",
    "AddressClosed": "._errors",
    "AddressStatistics": "._address",
    "DeliveryError": "._errors",
    "GroupRecord": "._groups",
    "HermesError": "._errors",
    "MailboxOverflow": "._errors",
    "Reactor": "._reactor",
    "ReactorStatistics": "._reactor",
    "ReactorStopped": "._errors",
    "Registry": "._address",
    "RuntimeStopped": "._errors",
    "SignalStop": "._signals",
    "StartFailed": "._errors",
    "UsageError": "._errors",
    "WaitHandle": "._reactor",
    "claim_group_ledger": "._groups",
    "kill_group": "._process",
    "reap_orphan_groups": "._groups",
    "run_process": "._process",
    "use_group_ledger": "._groups",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Actor",
    "ActorContext",
    "ActorCrashed",
    "ActorPath",
    "Address",
    "AddressClosed",
    "AddressStatistics",
    "DeliveryError",
    "GroupRecord",
    "HermesError",
    "MailboxOverflow",
    "Reactor",
    "ReactorStatistics",
    "ReactorStopped",
    "Registry",
    "RuntimeStopped",
    "SignalStop",
    "StartFailed",
    "UsageError",
    "WaitHandle",
    "claim_group_ledger",
    "kill_group",
    "reap_orphan_groups",
    "run_process",
    "use_group_ledger",
]
