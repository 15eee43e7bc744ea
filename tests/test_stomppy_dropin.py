"""A stomp.py 9.0 user's own tests, observing stomp.py's side effects, pass against
amqstomp (issue "A stomp.py user's own tests pass unchanged"): stomp.py's DEBUG
frame and heart-beat lines under its ``"stomp.py"`` logger (compared with the
real stomp.py's on the same ActiveMQ), frames through a replaced ``conn.transport``
or ``conn.send_frame`` in stomp.py's argument shapes, ``conn.heartbeat_thread``,
a bare ``BaseTransport``'s no-op stubs, and errors raised where stomp.py raises
them (a bad host at ``connect()``, ``set_ssl``'s bad settings at ``connect()``).
"""
import logging
import re
import ssl
import threading
import time
import uuid
from unittest.mock import MagicMock, Mock

import pytest

import amqstomp
from amqstomp.exception import ConfigurationError
from amqstomp.transport import BaseTransport

from stomppy_reference import reference

# the real stomp.py, decided by module identity (tests/stomppy_reference.py); skipped only without stomp.py 9.0
stomp = reference("stomp")

pytestmark = pytest.mark.timeout(120)

WAIT = 15.0


def _until(predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# --------------------------------------------------------------------------- 4. a bare BaseTransport's stubs


def _stubs(transport_class):
    bare = transport_class()
    return [bare.send(b"SEND\n\n\x00"), bare.receive(), bare.cleanup(), bare.attempt_connection(),
            bare.disconnect_socket()]


def test_a_bare_base_transports_stubs_do_nothing_as_stomp_pys():
    assert _stubs(BaseTransport) == _stubs(stomp.transport.BaseTransport) == [None] * 5


def test_the_real_transport_still_refuses_without_a_socket():
    transport = amqstomp.transport.Transport([("127.0.0.1", 1)])
    with pytest.raises(amqstomp.exception.NotConnectedException):
        transport.send(b"\n")
    with pytest.raises(amqstomp.exception.NotConnectedException):
        transport.receive()
