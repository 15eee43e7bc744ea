"""Chooses the hand-off between a link's two threads (:class:`EventQueue`, see
:mod:`amqstomp._io._handoff_py` for how it works): the compiled
:mod:`amqstomp._io._handoff` when it is built and ``AMQSTOMP_NO_EXTENSIONS`` is not
set, else the pure-Python :mod:`amqstomp._io._handoff_py`. Both come from one source,
``amqstomp/_io/_handoff_py.py`` (compiled as it is, with the C types of
``amqstomp/_io/_handoff.pxd``), so they export the same names; type checkers see that
source. A compiled module that is there but does not import is replaced by the twin
with a RuntimeWarning (:mod:`amqstomp._compiled`).

Attributes:
    IMPLEMENTATION (str): ``"cython"`` or ``"python"``, whichever was loaded.
"""
from typing import TYPE_CHECKING

from .._compiled import choose
from ._handoff_py import __all__  # noqa: F401  (the same in both)

IMPLEMENTATION: str
if TYPE_CHECKING:
    from ._handoff_py import *  # noqa: F401,F403
else:
    _module, IMPLEMENTATION = choose("amqstomp._io._handoff", "amqstomp._io._handoff_py", globals())
