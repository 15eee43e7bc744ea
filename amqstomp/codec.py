"""Chooses the STOMP codec: the compiled :mod:`amqstomp._codec` when it is
built and ``AMQSTOMP_NO_EXTENSIONS`` is not set, else the pure-Python twin
:mod:`amqstomp._codec_py`. Both export the same names.

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
import os

if os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
    from ._codec_py import *  # noqa: F401,F403
    from ._codec_py import __all__  # noqa: F401

    IMPLEMENTATION = "python"
else:
    try:
        from ._codec import *  # noqa: F401,F403
        from ._codec import __all__  # noqa: F401

        IMPLEMENTATION = "cython"
    except ImportError:  # not built (no compiler, or a source checkout)
        from ._codec_py import *  # noqa: F401,F403
        from ._codec_py import __all__  # noqa: F401

        IMPLEMENTATION = "python"
