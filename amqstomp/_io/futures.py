"""Futures of the I/O layer (receipts, the CONNECTED wait): bounded waits and
setting an outcome once."""
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import Any

from ..exception import ReceiptTimeout

__all__ = ["wait_future", "resolve", "fail"]


def wait_future(future: "Future[Any]", timeout_s: float, what: str) -> Any:
    """``future.result()`` within ``timeout_s`` seconds.

    Raises:
        ReceiptTimeout: ``what`` (e.g. ``"receipt 'r-1'"``) did not come in time.
    """
    try:
        return future.result(timeout_s)
    except _FutureTimeout:
        raise ReceiptTimeout("no %s within %.3g s" % (what, timeout_s)) from None


def resolve(future: "Future[Any]", value: Any) -> None:
    """Set ``future``'s result unless it is done (or cancelled) already."""
    try:
        if not future.done():
            future.set_result(value)
    except Exception:  # cancelled or resolved meanwhile
        pass


def fail(future: "Future[Any]", exc: BaseException) -> None:
    """Set ``future``'s exception unless it is done (or cancelled) already."""
    try:
        if not future.done():
            future.set_exception(exc)
    except Exception:
        pass
