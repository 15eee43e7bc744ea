# amqstomp._core._flow is amqstomp/_core/_flow_py.py compiled (setup.py, amqstomp/_core/_flow.pxd): one source,
# so its types are that module's.
from ._flow_py import *
from ._flow_py import __all__ as __all__
