"""Small helpers kept where stomp.py users look for them (``stomp.utils``).

``Frame`` is :class:`amqstomp.codec.Frame` (``cmd``, ``headers``, ``body``).
"""
import uuid
from typing import Any, Dict, Iterable, Mapping, Optional

from .codec import Frame

__all__ = ["Frame", "get_uuid", "merge_headers"]


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
