"""Typed messages of the runtime. Imports nothing from ``actors/``: it is the contract."""

from ._base import Message as Message
from ._base import from_json as from_json
from ._base import from_msgpack as from_msgpack
from ._base import to_json as to_json
from ._base import to_msgpack as to_msgpack
from ._correlation import Step as Step
from ._correlation import Token as Token
from ._credentials import KeyCondition as KeyCondition
from ._credentials import KeyLeased as KeyLeased
from ._credentials import KeyStatus as KeyStatus
from ._credentials import LeaseKey as LeaseKey
from ._credentials import NoKeyAvailable as NoKeyAvailable
from ._credentials import PoolInbox as PoolInbox
from ._credentials import PoolSaveDue as PoolSaveDue
from ._credentials import PoolSaveTimedOut as PoolSaveTimedOut
from ._credentials import PoolStateSaved as PoolStateSaved
from ._credentials import PoolStatus as PoolStatus
from ._credentials import PoolStatusRequest as PoolStatusRequest
from ._credentials import ReloadPool as ReloadPool
from ._credentials import ReportKey as ReportKey
from ._credentials import SavePoolState as SavePoolState
from ._faults import CrashFaults as CrashFaults
from ._faults import FaultPlan as FaultPlan
from ._faults import HookFaults as HookFaults
from ._faults import KeyFaults as KeyFaults
from ._faults import MessageFaults as MessageFaults
from ._faults import ModelFaults as ModelFaults
from ._faults import ProviderFaults as ProviderFaults
from ._faults import ReviewFaults as ReviewFaults
from ._faults import StoreFaults as StoreFaults
from ._faults import ToolFaults as ToolFaults
from ._faults import Workload as Workload
from ._gateway import AdapterState as AdapterState
from ._gateway import AdapterStatus as AdapterStatus
from ._gateway import AdapterStatusRequest as AdapterStatusRequest
from ._gateway import AdapterTimer as AdapterTimer
from ._gateway import ChatType as ChatType
from ._gateway import PlatformFile as PlatformFile
from ._gateway import PlatformMessage as PlatformMessage
from ._gateway import StreamOpened as StreamOpened
from ._leases import AcquireLease as AcquireLease
from ._leases import Fence as Fence
from ._leases import LeaseCommand as LeaseCommand
from ._leases import LeaseGranted as LeaseGranted
from ._leases import LeaseRecord as LeaseRecord
from ._leases import LeaseRefused as LeaseRefused
from ._leases import LeaseReleased as LeaseReleased
from ._leases import NodeHeartbeat as NodeHeartbeat
from ._leases import NodeRecord as NodeRecord
from ._leases import NodeSeen as NodeSeen
from ._leases import ReleaseLease as ReleaseLease
from ._leases import RenewLease as RenewLease
from ._mcp import McpLinkUp as McpLinkUp
from ._mcp import McpServerInbox as McpServerInbox
from ._mcp import McpToolInfo as McpToolInfo
from ._mcp import McpToolKind as McpToolKind
from ._mcp import McpToolsListed as McpToolsListed
from ._mcp import ReconnectMcp as ReconnectMcp
from ._reactor import ProcessResult as ProcessResult
from ._reactor import WaitFinished as WaitFinished
from ._reactor import WaitStatus as WaitStatus
from ._session import TERMINAL_EVENTS as TERMINAL_EVENTS
from ._session import AnswerClarification as AnswerClarification
from ._session import AnySessionEvent as AnySessionEvent
from ._session import ApprovalChoice as ApprovalChoice
from ._session import ApprovalRequested as ApprovalRequested
from ._session import ApprovalResolved as ApprovalResolved
from ._session import BusyPolicy as BusyPolicy
from ._session import CancelTurn as CancelTurn
from ._session import ClarificationRequested as ClarificationRequested
from ._session import ClientTool as ClientTool
from ._session import CompressContext as CompressContext
from ._session import ContextCompressed as ContextCompressed
from ._session import EnsureSession as EnsureSession
from ._session import HookSkipped as HookSkipped
from ._session import MemorySkipped as MemorySkipped
from ._session import ModelFallback as ModelFallback
from ._session import ModelRetrying as ModelRetrying
from ._session import ModelSwitched as ModelSwitched
from ._session import ReasoningDelta as ReasoningDelta
from ._session import RefreshSettings as RefreshSettings
from ._session import ResolveApproval as ResolveApproval
from ._session import ReviewFinished as ReviewFinished
from ._session import SessionCommand as SessionCommand
from ._session import SessionEvent as SessionEvent
from ._session import SessionInbox as SessionInbox
from ._session import SessionReady as SessionReady
from ._session import SessionRecovered as SessionRecovered
from ._session import StartTurn as StartTurn
from ._session import Subscribe as Subscribe
from ._session import SwitchModel as SwitchModel
from ._session import TextDelta as TextDelta
from ._session import ToolFinished as ToolFinished
from ._session import ToolProgress as ToolProgress
from ._session import ToolStarted as ToolStarted
from ._session import TurnCancelled as TurnCancelled
from ._session import TurnCompleted as TurnCompleted
from ._session import TurnFailed as TurnFailed
from ._session import TurnOptions as TurnOptions
from ._session import TurnQueued as TurnQueued
from ._session import TurnRejected as TurnRejected
from ._session import TurnStarted as TurnStarted
from ._session import TurnUndone as TurnUndone
from ._session import UndoTurn as UndoTurn
from ._session import Unsubscribe as Unsubscribe
from ._session import UserMessageSaved as UserMessageSaved
from ._store import AppendMessages as AppendMessages
from ._store import CreateSession as CreateSession
from ._store import DeleteResponse as DeleteResponse
from ._store import DeleteSession as DeleteSession
from ._store import EndSession as EndSession
from ._store import GetStoreStatistics as GetStoreStatistics
from ._store import MessagesPersisted as MessagesPersisted
from ._store import PutResponse as PutResponse
from ._store import RemoveLastTurn as RemoveLastTurn
from ._store import ReopenWrites as ReopenWrites
from ._store import ResponseDeleted as ResponseDeleted
from ._store import ResponseStored as ResponseStored
from ._store import SearchHit as SearchHit
from ._store import SegmentRecord as SegmentRecord
from ._store import SegmentStart as SegmentStart
from ._store import SessionCreated as SessionCreated
from ._store import SessionDeleted as SessionDeleted
from ._store import SessionEnded as SessionEnded
from ._store import SessionRecord as SessionRecord
from ._store import SessionTotalsUpdated as SessionTotalsUpdated
from ._store import StoreCommand as StoreCommand
from ._store import StoredMessage as StoredMessage
from ._store import StoreFailed as StoreFailed
from ._store import StoreReply as StoreReply
from ._store import StoreStatistics as StoreStatistics
from ._store import TurnMark as TurnMark
from ._store import TurnRecord as TurnRecord
from ._store import TurnRemoved as TurnRemoved
from ._store import UpdateSessionTotals as UpdateSessionTotals
from ._supervision import ChildExited as ChildExited
from ._supervision import ChildRestarted as ChildRestarted
from ._supervision import ChildStarted as ChildStarted
from ._supervision import Escalated as Escalated
from ._supervision import ExitKind as ExitKind
from ._supervision import InjectCrash as InjectCrash
from ._supervision import NodeSnapshot as NodeSnapshot
from ._supervision import NodeState as NodeState
from ._supervision import ReplaceTemplate as ReplaceTemplate
from ._supervision import RestartDue as RestartDue
from ._supervision import Shutdown as Shutdown
from ._supervision import ShutdownTimedOut as ShutdownTimedOut
from ._supervision import StartChild as StartChild
from ._supervision import SupervisorInbox as SupervisorInbox
from ._supervision import TerminateChild as TerminateChild
from ._supervision import TreeSnapshot as TreeSnapshot
from ._transcript import ChatMessage as ChatMessage
from ._transcript import Role as Role
from ._transcript import ToolCall as ToolCall

__all__ = [
    "AcquireLease",
    "AdapterState",
    "AdapterStatus",
    "AdapterStatusRequest",
    "AdapterTimer",
    "AnswerClarification",
    "AnySessionEvent",
    "AppendMessages",
    "ApprovalChoice",
    "ApprovalRequested",
    "ApprovalResolved",
    "BusyPolicy",
    "CancelTurn",
    "ChatMessage",
    "ChatType",
    "ChildExited",
    "ChildRestarted",
    "ChildStarted",
    "ClarificationRequested",
    "ClientTool",
    "CompressContext",
    "ContextCompressed",
    "CrashFaults",
    "CreateSession",
    "DeleteResponse",
    "DeleteSession",
    "EndSession",
    "EnsureSession",
    "Escalated",
    "ExitKind",
    "FaultPlan",
    "Fence",
    "GetStoreStatistics",
    "HookFaults",
    "HookSkipped",
    "InjectCrash",
    "KeyCondition",
    "KeyFaults",
    "KeyLeased",
    "KeyStatus",
    "LeaseCommand",
    "LeaseGranted",
    "LeaseKey",
    "LeaseRecord",
    "LeaseRefused",
    "LeaseReleased",
    "McpLinkUp",
    "McpServerInbox",
    "McpToolInfo",
    "McpToolKind",
    "McpToolsListed",
    "MemorySkipped",
    "Message",
    "MessageFaults",
    "MessagesPersisted",
    "ModelFallback",
    "ModelFaults",
    "ModelRetrying",
    "ModelSwitched",
    "NoKeyAvailable",
    "NodeHeartbeat",
    "NodeRecord",
    "NodeSeen",
    "NodeSnapshot",
    "NodeState",
    "PlatformFile",
    "PlatformMessage",
    "PoolInbox",
    "PoolSaveDue",
    "PoolSaveTimedOut",
    "PoolStateSaved",
    "PoolStatus",
    "PoolStatusRequest",
    "ProcessResult",
    "ProviderFaults",
    "PutResponse",
    "ReasoningDelta",
    "ReconnectMcp",
    "RefreshSettings",
    "ReleaseLease",
    "ReloadPool",
    "RemoveLastTurn",
    "RenewLease",
    "ReopenWrites",
    "ReplaceTemplate",
    "ReportKey",
    "ResolveApproval",
    "ResponseDeleted",
    "ResponseStored",
    "RestartDue",
    "ReviewFaults",
    "ReviewFinished",
    "Role",
    "SavePoolState",
    "SearchHit",
    "SegmentRecord",
    "SegmentStart",
    "SessionCommand",
    "SessionCreated",
    "SessionDeleted",
    "SessionEnded",
    "SessionEvent",
    "SessionInbox",
    "SessionReady",
    "SessionRecord",
    "SessionRecovered",
    "SessionTotalsUpdated",
    "Shutdown",
    "ShutdownTimedOut",
    "StartChild",
    "StartTurn",
    "Step",
    "StoreCommand",
    "StoreFailed",
    "StoreFaults",
    "StoreReply",
    "StoreStatistics",
    "StoredMessage",
    "StreamOpened",
    "Subscribe",
    "SupervisorInbox",
    "SwitchModel",
    "TERMINAL_EVENTS",
    "TerminateChild",
    "TextDelta",
    "Token",
    "ToolCall",
    "ToolFaults",
    "ToolFinished",
    "ToolProgress",
    "ToolStarted",
    "TreeSnapshot",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnMark",
    "TurnOptions",
    "TurnQueued",
    "TurnRecord",
    "TurnRejected",
    "TurnRemoved",
    "TurnStarted",
    "TurnUndone",
    "UndoTurn",
    "Unsubscribe",
    "UpdateSessionTotals",
    "UserMessageSaved",
    "WaitFinished",
    "WaitStatus",
    "Workload",
    "from_json",
    "from_msgpack",
    "to_json",
    "to_msgpack",
]
