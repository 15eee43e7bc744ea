"""What the subscriptions and transactions of :mod:`amqstomp.aio` use of their client
(:class:`amqstomp.aio.client.Client` has it): typed here so that they do not import the
client module, which imports them.

Licensed under the Apache License, Version 2.0.
"""
import asyncio
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Protocol, Union

from ..codec import Frame
from .._core.transactions import TransactionTable
from ._link import AioLink

if TYPE_CHECKING:
    from .subscription import Subscription

__all__ = ["ClientPort"]


class ClientPort(Protocol):
    """The client as its subscriptions and transactions see it."""

    transactions: TransactionTable

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def check_loop(self) -> None: ...

    def require(self) -> AioLink: ...

    async def ready(self, timeout: Optional[float], what: str) -> AioLink: ...

    def hands_over(self, sub: "Subscription", link: AioLink) -> bool: ...

    def timeout_s(self, timeout: Optional[float]) -> float: ...

    def transaction_check(self, cmd: str, transaction: str) -> None: ...

    def write_now(self, link: AioLink, cmd: str, headers: Dict[str, Any], body: bytes) -> bool: ...

    async def write_frame(self, link: AioLink, cmd: str, headers: Dict[str, Any], body: bytes, receipt: bool,
                           timeout: Optional[float], what: object) -> Optional[Frame]: ...

    async def confirm_subscription(self, sub: "Subscription") -> None: ...

    def forget(self, sub: "Subscription") -> None: ...

    async def send(self, destination: str, body: Union[bytes, str], headers: Optional[Mapping[str, Any]] = None,
                   *, receipt: bool = True, transaction: Optional[str] = None, content_type: Optional[str] = None,
                   timeout: Optional[float] = None) -> None: ...
