"""Chooses the flow-control module: the compiled :mod:`amqstomp._flow` when it
is built and ``AMQSTOMP_NO_EXTENSIONS`` is not set, else the pure-Python
:mod:`amqstomp._flow_py`. Both come from one source, ``amqstomp/_flow_py.py``
(compiled as it is, with the C types of ``amqstomp/_flow.pxd``), so they export
the same names; type checkers see that source.

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
import os
from typing import TYPE_CHECKING

from ._flow_py import __all__  # noqa: F401  (the same in both)

IMPLEMENTATION: str
if TYPE_CHECKING:
    from ._flow_py import *  # noqa: F401,F403
elif os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
    from ._flow_py import *  # noqa: F401,F403

    IMPLEMENTATION = "python"
else:
    try:
        from ._flow import *  # noqa: F401,F403

        IMPLEMENTATION = "cython"
    except ImportError:  # not built
        from ._flow_py import *  # noqa: F401,F403

        IMPLEMENTATION = "python"
