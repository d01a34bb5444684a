"""Session events into trio (the subscriber lives with the sessions, in ``actors.agent``)."""

from actors.agent._reader import MAX_BUFFERED as MAX_BUFFERED
from actors.agent._reader import Overflowed as Overflowed
from actors.agent._reader import TrioSubscriber as TrioSubscriber
