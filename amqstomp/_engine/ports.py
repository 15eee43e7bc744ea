"""The typed interfaces between the engine's parts and the transport they drive."""
from typing import Any, Callable, Mapping, Optional, Protocol

__all__ = ["TransportPort"]


class TransportPort(Protocol):
    """What a :class:`SubscriptionManager` uses of its transport (a
    :class:`amqstomp._io.driver.Driver` is one: the JMS consumer link's, with its
    own dispatch policy, ``deliver=``, and the stomp.py API's ``Transport``)."""

    @property
    def version(self) -> Optional[str]: ...

    @property
    def server(self) -> Optional[str]: ...

    @property
    def dialect(self) -> str: ...

    def is_open(self) -> bool: ...

    def wait_connected(self, timeout: Optional[float] = None) -> Any: ...

    def send_frame(self, cmd: str, headers: Optional[Mapping[str, Any]] = None, body: Any = b"",
                   write_timeout: Optional[float] = None, defer: bool = False, head: Any = None,
                   link_seq: int = 0, nowait: bool = False, hooks: bool = True) -> Any: ...

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Any: ...

    def notify(self, event: str, arg: Any = None) -> None: ...

    def deliver_message(self, frame: Any) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...
