"""The typed interface between the engine and the driver it drives: :class:`TransportPort`.

Every member the engine's parts use of their driver is declared here, and
nothing else: :class:`amqstomp._engine.client.Client`,
:class:`amqstomp._engine.subscription.SubscriptionManager` (through
:class:`amqstomp._engine.applier.SubscriptionApplier`, which applies its actions),
:class:`amqstomp._engine.failover.Reconnector` and :class:`amqstomp._engine.ledger.SocketLedger`
are typed against it (mypy checks them, ``tests/test_typing.py``). The
threaded driver, :class:`amqstomp._io.driver.Driver`, is one (the JMS links'),
and so is the stomp.py API's ``Transport``, built on it; an asyncio driver
would be another.
"""
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Optional, Protocol, Tuple

from .._core.events import LinkEvent

__all__ = ["TransportPort", "WaitUp"]

HostAndPort = Tuple[str, int]

#: ``wait_up(command, cause)``: block until a new socket is connected, or raise
#: (a facade's wait policy and exception, handed to the engine's failover-aware
#: writes); ``cause`` is the failed write's exception, if any.
WaitUp = Callable[[str, Optional[BaseException]], None]


class TransportPort(Protocol):
    """What the engine uses of its driver (see the module docstring)."""

    # ------------------------------------------------------------ the open socket
    @property
    def version(self) -> Optional[str]: ...

    @property
    def server(self) -> Optional[str]: ...

    @property
    def dialect(self) -> str: ...

    @property
    def link_seq(self) -> int: ...

    @property
    def current_host_and_port(self) -> Optional[HostAndPort]: ...

    @property
    def last_host_and_port(self) -> Optional[HostAndPort]: ...

    def connected_link_seq(self) -> int: ...

    def link_alive(self, seq: int) -> bool: ...

    def is_open(self) -> bool: ...

    def is_connected(self) -> bool: ...

    def closing(self) -> bool: ...

    # ------------------------------------------------------------ opening and closing
    def open(self, version: str = "1.2", only: Optional[HostAndPort] = None,
             deadline: Optional[float] = None) -> HostAndPort: ...

    def close(self, timeout: Optional[float] = ..., reason: str = ..., silent: bool = False) -> None: ...

    def drop(self, reason: str, link_seq: int) -> None: ...

    def wait_connected(self, timeout: Optional[float] = None) -> Any: ...

    def expect_connected(self, within_s: float, link_seq: int) -> None: ...

    @property
    def connected_frame(self) -> Any: ...

    # ------------------------------------------------------------ frames and receipts
    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None, body: Any = b"",
                   write_timeout: Optional[float] = None, defer: bool = False, head: Any = None,
                   link_seq: int = 0, nowait: bool = False, hooks: bool = True) -> Any: ...

    def receipt_future(self, receipt_id: str) -> "Optional[Future[Any]]": ...

    def own_receipt(self, receipt_id: str) -> None: ...

    def wait_future(self, future: "Future[Any]", timeout: Optional[float] = None, what: str = "reply") -> Any: ...

    # ------------------------------------------------------------ threads: timer, dispatcher, reader
    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Any: ...

    def notify(self, frame_type: str, frame: Any = None) -> None: ...

    def announce(self, event: LinkEvent) -> None: ...

    def post(self, event: LinkEvent) -> None: ...

    def deliver_message(self, frame: Any) -> None: ...

    def set_observer(self, observer: Any) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...
