"""Typed messages of the runtime. Imports nothing from ``actors/``: it is the contract."""

from ._base import Message as Message
from ._base import from_json as from_json
from ._base import from_msgpack as from_msgpack
from ._base import to_json as to_json
from ._base import to_msgpack as to_msgpack
from ._reactor import ProcessResult as ProcessResult
from ._reactor import WaitFinished as WaitFinished
from ._reactor import WaitStatus as WaitStatus
from ._supervision import ChildExited as ChildExited
from ._supervision import ChildRestarted as ChildRestarted
from ._supervision import ChildStarted as ChildStarted
from ._supervision import Escalated as Escalated
from ._supervision import ExitKind as ExitKind
from ._supervision import NodeSnapshot as NodeSnapshot
from ._supervision import NodeState as NodeState
from ._supervision import RestartDue as RestartDue
from ._supervision import Shutdown as Shutdown
from ._supervision import ShutdownTimedOut as ShutdownTimedOut
from ._supervision import StartChild as StartChild
from ._supervision import TerminateChild as TerminateChild
from ._supervision import TreeSnapshot as TreeSnapshot
from ._transcript import ChatMessage as ChatMessage
from ._transcript import Role as Role
from ._transcript import ToolCall as ToolCall

__all__ = [
    "ChatMessage",
    "ChildExited",
    "ChildRestarted",
    "ChildStarted",
    "Escalated",
    "ExitKind",
    "Message",
    "NodeSnapshot",
    "NodeState",
    "ProcessResult",
    "RestartDue",
    "Role",
    "Shutdown",
    "ShutdownTimedOut",
    "StartChild",
    "TerminateChild",
    "ToolCall",
    "TreeSnapshot",
    "WaitFinished",
    "WaitStatus",
    "from_json",
    "from_msgpack",
    "to_json",
    "to_msgpack",
]
