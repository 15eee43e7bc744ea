"""The connection classes under stomp.py 9.0's module name (``stomp.connect``).

:class:`StompConnection10`, :class:`StompConnection11` and
:class:`StompConnection12` are :mod:`amqstomp.connection`'s. stomp.py's module
star-imports ``stomp.protocol``, ``stomp.transport`` and ``stomp.utils``, so
programs also find the protocol and transport classes, listeners, constants
and helpers here; they are amqstomp's (:mod:`amqstomp.protocol`, :mod:`amqstomp.listener`,
:mod:`amqstomp.utils`, :mod:`amqstomp.constants`). ``from amqstomp.connect import *``
gives what stomp.py's gives: those star imports' names, the modules and socket
constants they hand on included (stomp.py's modules have no ``__all__``).
"""
import copy
import errno
import math
import os
import queue
import random
import re
import selectors
import socket
import ssl
import sys
import threading
import time
import uuid
from collections import deque
from io import BytesIO
from ssl import SSLError
from time import monotonic
from typing import TYPE_CHECKING, Any, List

import amqstomp as stomp  # stomp.py's module has the package as `stomp` (from stomp.transport's star import)
from . import exception, log, utils

from .connection import BaseConnection, StompConnection10, StompConnection11, StompConnection12
from .constants import (
    CMD_ABORT,
    CMD_ACK,
    CMD_BEGIN,
    CMD_COMMIT,
    CMD_CONNECT,
    CMD_DISCONNECT,
    CMD_NACK,
    CMD_SEND,
    CMD_STOMP,
    CMD_SUBSCRIBE,
    CMD_UNSUBSCRIBE,
    HDR_ACCEPT_VERSION,
    HDR_ACK,
    HDR_CONTENT_LENGTH,
    HDR_CONTENT_TYPE,
    HDR_DESTINATION,
    HDR_HEARTBEAT,
    HDR_HOST,
    HDR_ID,
    HDR_LOGIN,
    HDR_MESSAGE_ID,
    HDR_PASSCODE,
    HDR_RECEIPT,
    HDR_SUBSCRIPTION,
    HDR_TRANSACTION,
)
from .exception import ConnectFailedException
from .listener import (
    ConnectionListener,
    HeartbeatListener,
    PrintingListener,
    Publisher,
    StatsListener,
    TestListener,
    WaitingListener,
)
from .protocol import Protocol10, Protocol11, Protocol12
from .transport import DEFAULT_SSL_VERSION, LINUX_KEEPALIVE_AVAIL, MAC_KEEPALIVE_AVAIL, BaseTransport, Transport
from .utils import (
    ENC_NEWLINE,
    ENC_NULL,
    HEADER_LINE_RE,
    HEARTBEAT_FRAME,
    LINE_END_RE,
    NULL,
    PASSCODE_RE,
    PREAMBLE_END_RE,
    Frame,
    PollableQueue,
    calculate_heartbeats,
    clean_headers,
    clean_lines,
    convert_frame,
    decode,
    default_create_thread,
    encode,
    get_errno,
    get_uuid,
    is_eol_default,
    is_localhost,
    join,
    length,
    merge_headers,
    pack,
    parse_frame,
    parse_headers,
)
from . import protocol as _protocol, transport as _transport, utils as _utils

if LINUX_KEEPALIVE_AVAIL:
    from socket import SO_KEEPALIVE, SOL_SOCKET, SOL_TCP, TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL
if MAC_KEEPALIVE_AVAIL:
    from socket import IPPROTO_TCP

#: What ``from amqstomp.connect import *`` (``stomp.connect``) gives: stomp.py 9.0's names, no
#: more: its connection classes and the star imports of stomp.protocol and stomp.transport.
__all__ = ["BaseConnection", "StompConnection10", "StompConnection11", "StompConnection12"]
__all__ += _protocol.__all__
__all__ += _transport.__all__

if TYPE_CHECKING:
    #: :data:`amqstomp.utils.LOCALHOST_NAMES` (the same list, worked out on first use)
    LOCALHOST_NAMES: List[str]
else:
    __getattr__ = _utils.lazy_localhost_names(__name__)
