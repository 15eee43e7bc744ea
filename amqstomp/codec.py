"""Chooses the STOMP codec: the compiled :mod:`amqstomp._core._codec` when it is
built and ``AMQSTOMP_NO_EXTENSIONS`` is not set, else the pure-Python twin
:mod:`amqstomp._core._codec_py`. Both export the same names (type checkers see the
twin's, which are the reference).

A compiled module that is there but does not import (a truncated ``.so``...)
is replaced by the twin with a RuntimeWarning naming the import error
(:mod:`amqstomp._compiled`); ``AMQSTOMP_NO_EXTENSIONS=1`` chooses the twin quietly.

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
from typing import TYPE_CHECKING

from ._compiled import choose
from ._core._codec_py import __all__  # noqa: F401  (the same in both)

IMPLEMENTATION: str
if TYPE_CHECKING:
    from ._core._codec_py import *  # noqa: F401,F403
else:
    _module, IMPLEMENTATION = choose("amqstomp._core._codec", "amqstomp._core._codec_py", globals())
