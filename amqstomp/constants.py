"""STOMP command and header names as constants, under stomp.py 9.0's names
(``stomp.constants``): ``CMD_*`` for the client frames' commands, ``HDR_*``
for the header names a client writes or reads most (STOMP 1.2 spec, "Client
Frames" and "Standard Headers").

Every ``CMD_*`` and ``HDR_*`` name is a ``str`` equal to the text on the wire.
:data:`SECRET_HEADERS` (amqstomp's own) names the headers whose values no log
line, exception message or repr shows.
"""

__all__ = [
    "HDR_ACCEPT_VERSION", "HDR_ACK", "HDR_CONTENT_LENGTH", "HDR_CONTENT_TYPE", "HDR_DESTINATION",
    "HDR_HEARTBEAT", "HDR_HOST", "HDR_ID", "HDR_MESSAGE_ID", "HDR_LOGIN", "HDR_PASSCODE", "HDR_RECEIPT",
    "HDR_SUBSCRIPTION", "HDR_TRANSACTION",
    "CMD_ABORT", "CMD_ACK", "CMD_BEGIN", "CMD_COMMIT", "CMD_CONNECT", "CMD_DISCONNECT", "CMD_NACK",
    "CMD_STOMP", "CMD_SEND", "CMD_SUBSCRIBE", "CMD_UNSUBSCRIBE",
]

# header names (STOMP 1.2 spec: CONNECT, SEND, SUBSCRIBE, ACK... and "Standard Headers")
HDR_ACCEPT_VERSION = "accept-version"
HDR_ACK = "ack"
HDR_CONTENT_LENGTH = "content-length"
HDR_CONTENT_TYPE = "content-type"
HDR_DESTINATION = "destination"
HDR_HEARTBEAT = "heart-beat"
HDR_HOST = "host"
HDR_ID = "id"
HDR_MESSAGE_ID = "message-id"
HDR_LOGIN = "login"
HDR_PASSCODE = "passcode"
HDR_RECEIPT = "receipt"
HDR_SUBSCRIPTION = "subscription"
HDR_TRANSACTION = "transaction"

# commands of the frames a client sends (STOMP 1.2 spec, "Client Frames")
CMD_ABORT = "ABORT"
CMD_ACK = "ACK"
CMD_BEGIN = "BEGIN"
CMD_COMMIT = "COMMIT"
CMD_CONNECT = "CONNECT"
CMD_DISCONNECT = "DISCONNECT"
CMD_NACK = "NACK"
CMD_STOMP = "STOMP"
CMD_SEND = "SEND"
CMD_SUBSCRIBE = "SUBSCRIBE"
CMD_UNSUBSCRIBE = "UNSUBSCRIBE"

#: Headers whose values are secrets: no log line, exception message or repr shows them
#: (amqstomp's own choice; the one place that decides it).
SECRET_HEADERS = frozenset((HDR_PASSCODE,))
