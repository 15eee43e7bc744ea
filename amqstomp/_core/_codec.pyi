# Stub of the compiled codec (amqstomp/_core/_codec.pyx); same API as amqstomp/_core/_codec_py.py.
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple, Union

from typing_extensions import disjoint_base

from ..exception import StompProtocolError as StompProtocolError

__all__ = ['Frame', 'FrameParser', 'encode_frame', 'encode_headers', 'FrameHead', 'HEARTBEAT', 'VERSIONS', 'CLIENT_COMMANDS', 'SERVER_COMMANDS', 'DEFAULT_MAX_COMMAND_LENGTH', 'DEFAULT_MAX_HEADER_LINE_LENGTH', 'DEFAULT_MAX_HEADERS', 'DEFAULT_MAX_BODY_LENGTH', 'MAX_LIMIT']

HEARTBEAT: bytes
VERSIONS: Tuple[str, ...]
CLIENT_COMMANDS: FrozenSet[str]
SERVER_COMMANDS: FrozenSet[str]
DEFAULT_MAX_COMMAND_LENGTH: int
DEFAULT_MAX_HEADER_LINE_LENGTH: int
DEFAULT_MAX_HEADERS: int
DEFAULT_MAX_BODY_LENGTH: int
MAX_LIMIT: int

@disjoint_base
class Frame:
    cmd: str
    headers: Dict[str, str]
    body: Union[bytes, str]
    delivery_count: int
    link_seq: int
    original_headers: Dict[str, str]
    def __init__(self, cmd: str, headers: Optional[Dict[str, str]] = ..., body: Union[bytes, str, None] = ...) -> None: ...
    def __eq__(self, other: object, /) -> bool: ...

@disjoint_base
class FrameParser:
    version: str
    @property
    def max_command_length(self) -> int: ...
    @property
    def max_header_line_length(self) -> int: ...
    @property
    def max_headers(self) -> int: ...
    @property
    def max_body_length(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def buffered(self) -> int: ...
    def __init__(self, version: str = ..., max_command_length: int = ..., max_header_line_length: int = ...,
                 max_headers: int = ..., max_body_length: int = ...) -> None: ...
    def feed(self, data: Union[bytes, bytearray, memoryview]) -> List[Frame]: ...
    @property
    def body_missing(self) -> int: ...
    def read_body(self, readinto: Callable[[Any], int]) -> int: ...

def encode_frame(command: str, headers: Optional[Mapping[str, Any]] = ...,
                 body: Union[bytes, bytearray, memoryview, str, None] = ...,
                 version: str = ..., auto_content_length: bool = ..., head: bytes = ...) -> bytes: ...
def encode_headers(command: str, headers: Mapping[str, Any], version: str = ...) -> bytes: ...

class FrameHead:
    command: str
    headers: Mapping[str, Any]
    encodings: Dict[str, bytes]
    def __init__(self, command: str, headers: Mapping[str, Any]) -> None: ...
    def encoded(self, version: str) -> bytes: ...
