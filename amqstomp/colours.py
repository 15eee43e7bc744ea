"""Terminal colour escape codes under stomp.py 9.0's names (``stomp.colours``,
used by its command-line client): ANSI SGR sequences, empty strings on Windows.

Attributes:
    GREEN, RED, BOLD (str): start the colour or weight.
    NO_COLOUR (str): back to the terminal's default.
"""
import platform

__all__ = ["GREEN", "RED", "NO_COLOUR", "BOLD", "platform"]  # stomp.py's star import gives platform too

if platform.system().lower() == "windows":
    GREEN = RED = NO_COLOUR = BOLD = ""
else:
    GREEN = "\x1b[32m"
    RED = "\x1b[31m"
    NO_COLOUR = "\x1b[0m"
    BOLD = "\x1b[1m"
