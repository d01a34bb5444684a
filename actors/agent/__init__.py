"""agent: sessions and their turn machine, model calls, the session event stream."""

from ._address import SESSIONS_PATH as SESSIONS_PATH
from ._address import session_address as session_address
from ._address import tell_session as tell_session
from ._approval_settings import ApprovalSettings as ApprovalSettings
from ._approval_settings import load_approval_settings as load_approval_settings
from ._approvals import ALLOWING as ALLOWING
from ._approvals import ApprovalGate as ApprovalGate
from ._caching import PromptCaching as PromptCaching
from ._config import ConfigError as ConfigError
from ._config import hermes_home as hermes_home
from ._config import load_model_settings as load_model_settings
from ._deps_table import DepsTable as DepsTable
from ._deps_table import deps_for as deps_for
from ._deps_table import platform_of as platform_of
from ._hub import HubRegistry as HubRegistry
from ._hub import SessionHub as SessionHub
from ._loading import build_system_prompt as build_system_prompt
from ._machine import MachineConfig as MachineConfig
from ._model import ModelClients as ModelClients
from ._model import ModelSettings as ModelSettings
from ._plan import ToolTraits as ToolTraits
from ._pricing import Price as Price
from ._session import SessionActor as SessionActor
from ._session_deps import SessionDeps as SessionDeps
from ._tools import ToolContext as ToolContext
from ._tools import ToolOutput as ToolOutput
from ._tools import ToolSpec as ToolSpec
from ._tools import Workspace as Workspace
from ._tree import agent_specs as agent_specs
from ._tree import build_agent_runtime as build_agent_runtime
from ._tree import reader_opener as reader_opener
from ._tree import sessions_argument as sessions_argument
from ._tree import start_agent_runtime as start_agent_runtime

__all__ = [
    "ALLOWING",
    "ApprovalGate",
    "ApprovalSettings",
    "ConfigError",
    "DepsTable",
    "HubRegistry",
    "MachineConfig",
    "ModelClients",
    "ModelSettings",
    "Price",
    "PromptCaching",
    "SESSIONS_PATH",
    "SessionActor",
    "SessionDeps",
    "SessionHub",
    "ToolContext",
    "ToolOutput",
    "ToolSpec",
    "ToolTraits",
    "Workspace",
    "agent_specs",
    "build_agent_runtime",
    "build_system_prompt",
    "deps_for",
    "hermes_home",
    "load_approval_settings",
    "load_model_settings",
    "platform_of",
    "reader_opener",
    "session_address",
    "sessions_argument",
    "start_agent_runtime",
    "tell_session",
]
