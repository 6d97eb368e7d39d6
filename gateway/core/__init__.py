"""The connection core: one client connection as a sans-IO state machine.

``Connection.handle(event)`` takes what happened (``events``) and returns what to do
(``commands``); the asyncio layer (``runtime.client``) feeds events and carries
commands out, and decides nothing itself. The states and the events each accepts are
the table in ``states``. Per-request protocol work (authorization, throttling,
rewriting, operator filters) is the ``Session`` the core drives.
"""

from .commands import Command
from .connection import Connection, CoreServices
from .events import Event
from .states import State

__all__ = ["Command", "Connection", "CoreServices", "Event", "State"]
