"""Chooses the flow-control module: the compiled :mod:`amqstomp._flow` when it
is built and ``AMQSTOMP_NO_EXTENSIONS`` is not set, else the pure-Python twin
:mod:`amqstomp._flow_py`. Both export the same names.

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
import os

if os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
    from ._flow_py import *  # noqa: F401,F403
    from ._flow_py import __all__  # noqa: F401

    IMPLEMENTATION = "python"
else:
    try:
        from ._flow import *  # noqa: F401,F403
        from ._flow import __all__  # noqa: F401

        IMPLEMENTATION = "cython"
    except ImportError:  # not built
        from ._flow_py import *  # noqa: F401,F403
        from ._flow_py import __all__  # noqa: F401

        IMPLEMENTATION = "python"
