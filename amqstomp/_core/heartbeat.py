"""Heart-beat negotiation and deadlines (STOMP 1.2 "Heart-beating"), no clock.

Times are integers or floats in milliseconds on any monotonic scale the caller
chooses; this module never reads a clock. :class:`amqstomp._core.state.ProtocolState`
holds one connection's figures; the I/O layer asks it when to write a
heart-beat and when the peer is overdue.
"""
import logging
import math
from typing import Any, Optional, Tuple

from ..exception import ConfigurationError

__all__ = ["parse_heartbeat", "broker_heartbeat", "negotiate", "SEND_FRACTION", "PEER_GRID_FACTOR", "DUE_SLACK",
           "MIN_RECEIVE_SCALE", "send_period_ms", "receive_timeout_ms", "send_stall_timeout_ms", "check_receive_scale"]

log = logging.getLogger("amqstomp.protocol")

#: A heart-beat is written when nothing was written for this fraction of the
#: negotiated send interval. ActiveMQ checks reads on a fixed grid of exactly
#: that interval with no grace (``ProtocolConverter.hbGracePeriodMultiplier``
#: 1.0, ``AbstractInactivityMonitor.readCheck``), so writing at the full
#: interval would now and then leave one of its windows empty.
SEND_FRACTION = 0.5
#: Peers that decide on a fixed grid whether to send a keep-alive (ActiveMQ's
#: ``AbstractInactivityMonitor.writeCheck`` skips one when anything was written
#: in the previous window; RabbitMQ's heart-beater works the same way) can
#: leave up to two intervals between bytes: measured on ActiveMQ 5.17 with 1 s
#: heart-beats, 2.0 s of silence after CONNECTED or after a MESSAGE. The
#: receive deadline is therefore this many intervals times the grace factor.
PEER_GRID_FACTOR = 2.0
#: The smallest receive grace factor (``heart_beat_receive_scale``; the JMS URI's
#: ``heartBeatGraceFactor`` has the same floor): below 1 the receive check would
#: declare a live broker dead before the silence its own heart-beating may leave
#: (:data:`PEER_GRID_FACTOR` intervals); at 0 it fires at once.
MIN_RECEIVE_SCALE = 1.0
#: A send tick this close to the period (fraction) counts as due: timers fire
#: a little early now and then.
DUE_SLACK = 0.98


def parse_heartbeat(value: Optional[str]) -> Tuple[int, int]:
    """A ``heart-beat`` header value as (x, y) ms; (0, 0) when absent or malformed
    (logged at WARNING), negative values as 0.

    >>> parse_heartbeat("1000, 2000")
    (1000, 2000)
    """
    if not value:
        return 0, 0
    try:
        x, y = str(value).replace(" ", "").split(",")
        return max(0, int(x)), max(0, int(y))
    except ValueError:
        log.warning("ignoring malformed heart-beat header %r", value)
        return 0, 0


def broker_heartbeat(value: Optional[str], client: Tuple[int, int]) -> Tuple[int, int]:
    """The (sx, sy) ms of CONNECTED's ``heart-beat`` header for :func:`negotiate`;
    (0, 0) when absent (a broker without heart-beats, STOMP 1.0). A value that is
    not two non-negative integers (``-5,-5``, ``abc``) says nothing the client
    can rely on: logged at WARNING, naming the header, and the client keeps what
    it asked for -- it sends every cx ms and checks for the broker every cy ms
    (``client`` = (cx, cy)), so a broker that fell silent is still noticed.
    """
    if value is None:
        return 0, 0
    try:
        x, y = str(value).replace(" ", "").split(",")
        sx, sy = int(x), int(y)
        if sx >= 0 and sy >= 0:
            return sx, sy
    except ValueError:
        pass
    log.warning("the broker's CONNECTED frame has a malformed heart-beat header %r (STOMP 1.2 \"Heart-beating\": "
                "two non-negative integers): keeping this client's own heart-beats (%d,%d ms: it writes at that "
                "interval and expects the broker at that interval)", value, client[0], client[1])
    return client[1], client[0]


def negotiate(client: Tuple[int, int], server: Tuple[int, int]) -> Tuple[int, int]:
    """(send_ms, receive_ms) from the client's CONNECT ``heart-beat`` (cx, cy) and
    the server's CONNECTED one (sx, sy): the client sends every MAX(cx, sy) ms
    when both are non-zero, expects the server every MAX(sx, cy) ms when both
    are non-zero; 0 means off (STOMP 1.2 "Heart-beating")."""
    cx, cy = client
    sx, sy = server
    return (max(cx, sy) if cx and sy else 0), (max(sx, cy) if sx and cy else 0)


def send_period_ms(send_ms: int) -> float:
    """How often (ms) the send check runs for a negotiated send interval: a
    heart-beat goes out after this much write silence (:data:`SEND_FRACTION`)."""
    return send_ms * SEND_FRACTION


def receive_timeout_ms(receive_ms: int, grace: float) -> float:
    """Silence (ms) after which the peer is declared dead, for a negotiated
    receive interval and a grace factor (stomp.py's ``heart_beat_receive_scale``,
    1.5): ``receive_ms x PEER_GRID_FACTOR x grace``; 0 when ``receive_ms`` is 0."""
    return receive_ms * PEER_GRID_FACTOR * grace


def send_stall_timeout_ms(send_ms: int, grace: float) -> float:
    """How long (ms) the peer may take none of the bytes this side has written
    before it is declared to have stopped reading: the receive bound applied to
    this side's own send interval, ``send_ms x PEER_GRID_FACTOR x grace``; 0
    when ``send_ms`` is 0 (no heart-beats sent: no such check).

    This side promised a byte every ``send_ms`` (STOMP 1.2 "Heart-beating"); a
    peer that takes nothing for this long gets none of them, so it either
    declared this side dead already or is not reading (ActiveMQ's producer flow
    control holding its transport thread looks the same: the socket is given
    up either way, and a failover connection moves on)."""
    return send_ms * PEER_GRID_FACTOR * grace


def check_receive_scale(value: Any) -> float:
    """``heart_beat_receive_scale`` checked: a finite number >= :data:`MIN_RECEIVE_SCALE`.

    Raises:
        TypeError: not an int or a float (a bool neither), naming the argument.
        ConfigurationError: (a ValueError) NaN, infinite or below 1.0, naming it.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("heart_beat_receive_scale must be a number (a float such as 1.5), got %r" % (value,))
    if not math.isfinite(value) or value < MIN_RECEIVE_SCALE:
        raise ConfigurationError("heart_beat_receive_scale must be a finite number >= %g (below 1 the receive "
                                 "check declares a live broker dead before its own heart-beat interval), got %r"
                                 % (MIN_RECEIVE_SCALE, value))
    return float(value)
