"""Errors of the runtime kernel.

HermesError
├── ExternalFailure     something outside the process failed (a server, a connection)
├── UsageError          the API was misused (wrong argument, wrong state)
├── DeliveryError       a message could not be delivered to an address
│   ├── MailboxOverflow   the address is buffering (actor restarting) and its buffer is full
│   └── AddressClosed     the actor at the address was stopped for good
├── ActorCrashed        the handler that would answer an ``ask`` crashed
├── InjectedCrash       a crash asked for on purpose (``InjectCrash``, chaos testing)
├── StartFailed         an actor's construction or ``started()`` raised
├── ReactorStopped      the reactor thread is not running, so no wait can start
└── RuntimeStopped      the runtime ended (shut down, or escalation reached the root)
"""

from __future__ import annotations


class HermesError(Exception):
    """Root of every error the runtime raises on purpose."""


class ExternalFailure(HermesError):
    """Something outside the process failed (a database server ended the connection, a peer went
    away); the message says what. An actor that crashes with one is logged by that message
    alone: a traceback would show only where our code noticed, not a fault of it."""


class UsageError(HermesError):
    """The API was called in a way it does not support; the message says how to fix it."""


class DeliveryError(HermesError):
    """A message could not be delivered to an address."""


class MailboxOverflow(DeliveryError):
    """The address's restart buffer is full; the message was refused and counted."""


class AddressClosed(DeliveryError):
    """The actor at this address was stopped for good; the message was dead-lettered."""


class ActorCrashed(HermesError):
    """The actor's handler raised while handling this request; the actor is restarting."""


class InjectedCrash(HermesError):
    """The actor crashed because it was told ``InjectCrash`` (a fault on purpose)."""


class StartFailed(HermesError):
    """An actor's construction or ``started()`` hook raised."""


class ReactorStopped(HermesError):
    """The reactor is not running; start the runtime before starting waits."""


class RuntimeStopped(HermesError):
    """The runtime has ended; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
