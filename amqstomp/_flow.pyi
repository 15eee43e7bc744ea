# Stub of the compiled flow module (amqstomp/_flow.pyx); same API as amqstomp/_flow_py.py.
from typing import Any, Dict, List, Optional

from typing_extensions import disjoint_base

from ._flow_py import MessageAudit as MessageAudit
from ._flow_py import PrefetchPolicy as PrefetchPolicy
from ._flow_py import RedeliveryPolicy as RedeliveryPolicy
from ._flow_py import optimized_ack_threshold as optimized_ack_threshold

__all__ = ['ACK_AUTO', 'ACK_CLIENT', 'ACK_CLIENT_INDIVIDUAL', 'ACK_MODES', 'DEFAULT_ACK_BATCH_CAP', 'DEFAULT_MAX_BUFFERED_BYTES', 'OPTIMIZE_ACK_RATIO', 'PrefetchPolicy', 'optimized_ack_threshold', 'SubscriptionWindow', 'RedeliveryPolicy', 'MessageAudit']

ACK_AUTO: int
ACK_CLIENT: int
ACK_CLIENT_INDIVIDUAL: int
ACK_MODES: Dict[str, int]
DEFAULT_ACK_BATCH_CAP: int
DEFAULT_MAX_BUFFERED_BYTES: int
OPTIMIZE_ACK_RATIO: float

@disjoint_base
class SubscriptionWindow:
    prefetch: int
    ack_mode: int
    auto_ack: bool
    optimize_acknowledge: bool
    threshold: int
    optimize_acknowledge_timeout_ms: int
    optimized_ack_scheduled_ack_interval_ms: int
    idle_ack_ms: int
    max_buffered: int
    max_buffered_bytes: int
    pending_bytes: int
    delivered: int
    consumed: int
    acked: int
    acks_sent: int
    def __init__(self, prefetch: int, ack_mode: int = ..., auto_ack: bool = ..., optimize_acknowledge: bool = ...,
                 ack_batch_cap: int = ..., optimize_acknowledge_timeout_ms: int = ...,
                 optimized_ack_scheduled_ack_interval_ms: int = ..., idle_ack_ms: int = ...,
                 max_buffered: Optional[int] = ..., max_buffered_bytes: int = ...) -> None: ...
    @property
    def pending(self) -> int: ...
    @property
    def unacked(self) -> int: ...
    @property
    def slow_consumer(self) -> bool: ...
    @property
    def paused(self) -> bool: ...
    def on_delivered(self, now_ms: int, nbytes: int = ...) -> bool: ...
    def should_resume(self) -> bool: ...
    def on_consumed(self, ack_id: Any, now_ms: int, nbytes: int = ...) -> Any: ...
    def on_application_ack(self, cumulative: bool = ...) -> None: ...
    def poll(self, now_ms: int) -> Any: ...
    def next_deadline_ms(self) -> Optional[int]: ...
    def flush(self, now_ms: int = ...) -> Any: ...
    def reset(self) -> None: ...
    def __reduce_cython__(self) -> Any: ...
    def __setstate_cython__(self, __pyx_state: Any) -> None: ...
