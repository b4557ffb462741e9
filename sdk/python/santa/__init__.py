"""Python SDK for santad: offload replies to frequent UDP requests into the kernel."""

from .client import DEFAULT_PATH, SOCKET_ENV, Client, Transaction, default_path
from .errors import NO_INDEX, SantaError
from .messages import (
    LAST_PAGE,
    Family,
    HelloReply,
    Interface,
    MsgType,
    Protocol,
    RuleCounters,
    RuleEntry,
    Service,
    ServiceStatsReply,
    StatusReply,
    XDPMode,
)
from .protocol import MAX_MESSAGE, VERSION, Header, decode, encode
from .rules import Copy, Guard, Processor, Put, Rule
from . import rulefile
from .tcp import accepted

__all__ = [
    "DEFAULT_PATH",
    "LAST_PAGE",
    "MAX_MESSAGE",
    "NO_INDEX",
    "SOCKET_ENV",
    "VERSION",
    "Client",
    "Copy",
    "Family",
    "Guard",
    "Header",
    "HelloReply",
    "Interface",
    "MsgType",
    "Processor",
    "Protocol",
    "Put",
    "Rule",
    "RuleCounters",
    "RuleEntry",
    "SantaError",
    "Service",
    "ServiceStatsReply",
    "StatusReply",
    "Transaction",
    "XDPMode",
    "accepted",
    "decode",
    "default_path",
    "encode",
    "rulefile",
]
