"""Chooses the STOMP codec: the compiled :mod:`amqstomp._codec` when it is
built and ``AMQSTOMP_NO_EXTENSIONS`` is not set, else the pure-Python twin
:mod:`amqstomp._codec_py`. Both export the same names (type checkers see the
twin's, which are the reference).

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
import os
from typing import TYPE_CHECKING

from ._codec_py import __all__  # noqa: F401  (the same in both)

IMPLEMENTATION: str
if TYPE_CHECKING:
    from ._codec_py import *  # noqa: F401,F403
elif os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
    from ._codec_py import *  # noqa: F401,F403

    IMPLEMENTATION = "python"
else:
    try:
        from ._codec import *  # noqa: F401,F403

        IMPLEMENTATION = "cython"
    except ImportError:  # not built (no compiler, or a source checkout)
        from ._codec_py import *  # noqa: F401,F403

        IMPLEMENTATION = "python"
