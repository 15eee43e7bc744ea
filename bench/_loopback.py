"""bench/_loopback: what the kernel alone costs a process that receives bytes over loopback TCP.

No broker and no STOMP: a thread of this process sends ``mib`` MiB over a loopback TCP connection
and the calling thread receives them with ``recv_into`` into one preallocated buffer of 1 MiB
(reused: no allocation, warm pages), re-arming ``TCP_QUICKACK`` before each read when asked (as
amqstomp's reader and bench/_raw_stomp.py do). The receiving thread's own CPU (``RUSAGE_THREAD``,
Linux) is the floor any client's "consume CPU per MiB" stands on, on this machine: bench/consume.py
prints it in copies of 1 MiB next to its memcpy baseline (issue 21 asks for at most 3).
"""
import resource
import socket
import sys
import threading
from typing import Dict

MIB = 1 << 20
#: Linux only (None elsewhere): the kernel's delayed ACK switched off until the next read
QUICKACK = getattr(socket, "TCP_QUICKACK", None) if sys.platform.startswith("linux") else None


def receive_cost(mib: int = 200, quickack: bool = True) -> Dict[str, float]:
    """Receive ``mib`` MiB over loopback TCP (see the module); returns ``mib``, ``bytes``
    (received: ``mib`` MiB), ``user_s`` and ``sys_s`` (the receiving thread's CPU), ``quickack``
    (whether it was re-armed: False where the platform has none)."""
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender_sock = socket.create_connection(listener.getsockname(), timeout=30.0)
        sock, _ = listener.accept()
    sock.settimeout(30.0)
    chunk = b"\x5a" * MIB

    def send() -> None:
        try:
            for _ in range(mib):
                sender_sock.sendall(chunk)
        finally:
            sender_sock.close()

    sender = threading.Thread(target=send, name="loopback-sender", daemon=True)
    buf = memoryview(bytearray(MIB))
    arm = quickack and QUICKACK is not None
    total = 0
    try:
        r0 = resource.getrusage(who)
        sender.start()
        while True:
            if arm:
                sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
            n = sock.recv_into(buf[total % MIB:])
            if not n:
                break
            total += n
        r1 = resource.getrusage(who)
    finally:
        sock.close()
        sender.join(30.0)
    return {"mib": mib, "bytes": total, "user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
            "quickack": arm}
