"""Small helpers kept where stomp.py users look for them (``stomp.utils``).

``Frame`` is :class:`amqstomp.codec.Frame` (``cmd``, ``headers``, ``body``).
"""
import threading
import uuid
from typing import Any, Dict, Iterable, Mapping, Optional

from .codec import Frame

__all__ = ["Frame", "get_uuid", "merge_headers", "MAX_WAIT_S", "clamp_wait"]

#: The longest wait, in seconds, that amqstomp hands to the platform (threading
#: waits, socket timeouts, timers): ``threading.TIMEOUT_MAX`` (about 292 years on
#: Linux, 49.7 days on Windows), at most 100 years. A longer valid timeout
#: (``timeout=1e12``) waits this long instead of raising OverflowError.
MAX_WAIT_S = min(threading.TIMEOUT_MAX, 100 * 365 * 86400.0)


def clamp_wait(seconds: Optional[float]) -> Optional[float]:
    """``seconds``, or :data:`MAX_WAIT_S` when it is longer (infinity too); None stays None."""
    if seconds is None or seconds <= MAX_WAIT_S:
        return seconds
    return MAX_WAIT_S


def get_uuid() -> str:
    """A random UUID4 as text (used for receipt and transaction ids)."""
    return str(uuid.uuid4())


def merge_headers(header_map_list: Iterable[Optional[Mapping[str, Any]]]) -> Dict[str, Any]:
    """Merge header maps left to right (later maps win); None entries are skipped."""
    headers: Dict[str, Any] = {}
    for header_map in header_map_list:
        if header_map:
            headers.update(header_map)
    return headers
