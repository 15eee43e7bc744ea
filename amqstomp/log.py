"""amqstomp's logging, under stomp.py 9.0's names (``stomp.log``).

amqstomp logs through ``logging.getLogger("amqstomp.<module>")``; the package
logger ``"amqstomp"`` has a :class:`logging.NullHandler` (a library does not
print unless the application asks it to). stomp.py logs through one logger,
``"stomp.py"``. How the two relate:

* ``"stomp.py"`` is the parent of ``"amqstomp"`` from ``import amqstomp`` on
  (:func:`route_to_stomp_py`; :func:`amqstomp.install_as_stomp` does it too),
  so a logging set-up written for stomp.py keeps applying with
  ``import amqstomp as stomp``: ``"stomp.py"``'s level applies to amqstomp's
  records when ``"amqstomp"`` (or the module's logger) has none, its handlers
  receive them, and ``propagate = False`` on it keeps them from the root's, as
  it did for stomp.py's records. Nothing is handled twice, and with nothing
  configured on ``"stomp.py"`` the records go to the root's handlers as any
  library's do.
* Configuring ``logging.getLogger("amqstomp")`` (level, handlers) works as
  well and takes precedence (its level is nearer the record).
* Records keep their own names (``amqstomp.transport``, ``amqstomp.connection``
  ...), so ``"%(name)s"`` tells them apart from stomp.py's own (which are all
  named ``"stomp.py"``). ``route_to_stomp_py(False)`` makes the root the parent
  again.

Passcodes are never logged and bodies never above DEBUG.

Attributes:
    DEBUG, INFO (int): :data:`logging.DEBUG` and :data:`logging.INFO`.
    verbose (bool): stomp.py's flag: when True, a record of an amqstomp
        logger that reports an exception among its arguments (a socket error,
        a failed connect) also carries its traceback (``exc_info``), as
        stomp.py's do. Read when each record is made, for every ``amqstomp.*``
        logger whenever it was created (a log-record factory installed at
        import, wrapping the one in place; :class:`VerboseFilter` is the same
        rule as a filter).
    debug, info, warning, error, isEnabledFor, setLevel: those methods of the
        ``"amqstomp"`` logger (stomp.py: of ``"stomp.py"``).
"""
import logging
import sys
import traceback
from typing import Any, Callable, Optional

#: What ``from amqstomp.log import *`` (``stomp.log``) gives: stomp.py 9.0's names (with the
#: ``logging`` module its module imports), no more; amqstomp's own (``route_to_stomp_py``,
#: ``VerboseFilter``, ``LOGGER_NAME``...) are imported by name.
__all__ = [
    "DEBUG", "INFO", "verbose", "log_to_stdout", "debug", "info", "warning", "error", "isEnabledFor",
    "setLevel", "logging",
]

DEBUG = logging.DEBUG
INFO = logging.INFO

#: the package logger; every amqstomp logger is below it
LOGGER_NAME = "amqstomp"
#: the logger stomp.py 9.0 logs through (``stomp/log.py``)
STOMP_PY_LOGGER_NAME = "stomp.py"

verbose = False

_logger = logging.getLogger(LOGGER_NAME)
if not any(isinstance(h, logging.NullHandler) for h in _logger.handlers):
    _logger.addHandler(logging.NullHandler())

debug = _logger.debug
info = _logger.info
warning = _logger.warning
error = _logger.error
isEnabledFor = _logger.isEnabledFor
setLevel = _logger.setLevel


def _has_handler(logger: logging.Logger) -> bool:
    """Whether a record of ``logger`` reaches a handler that is not a NullHandler."""
    current: Optional[logging.Logger] = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def report_callback_error(logger: logging.Logger, message: str, *args: Any, level: int = logging.ERROR) -> None:
    """Report the exception being handled, raised by the application's own code
    on one of amqstomp's threads (a listener's ``on_message``...): logged at
    ERROR with its traceback, and, when logging is not configured (only
    NullHandlers on ``logger``'s way), also written to ``sys.stderr`` as Python
    writes an exception that ends a thread (:func:`threading.excepthook`) and as
    stomp.py's listener errors appear through logging's last resort: never
    invisible. Call it from an ``except`` block. ``level``: the record's (ERROR; the
    asyncio API's handler failures, redelivered, are WARNINGs)."""
    logger.log(level, message, *args, exc_info=True)
    if not _has_handler(logger):
        sys.stderr.write("amqstomp: " + (message % args if args else message) + "\n" + traceback.format_exc())


def _first_exception(args: Any) -> Optional[BaseException]:
    values = args.values() if isinstance(args, dict) else (args if isinstance(args, tuple) else (args,))
    for value in values:
        if isinstance(value, BaseException):
            return value
    return None


class VerboseFilter(logging.Filter):
    """Adds ``exc_info`` to a record that names an exception among its
    arguments and has none, while :data:`verbose` is true; lets every record
    through."""

    def filter(self, record: logging.LogRecord) -> bool:
        if verbose and not record.exc_info:
            exc = _first_exception(record.args)
            if exc is not None:
                record.exc_info = (type(exc), exc, exc.__traceback__)
        return True


_VERBOSE_FILTER = VerboseFilter()
_previous_factory: Optional[Callable[..., logging.LogRecord]] = None


def _verbose_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    """The log-record factory: the previous factory's record, with
    :class:`VerboseFilter`'s rule applied to amqstomp's records."""
    assert _previous_factory is not None
    record = _previous_factory(*args, **kwargs)
    if verbose and not record.exc_info and record.name.startswith(LOGGER_NAME) and \
            (len(record.name) == len(LOGGER_NAME) or record.name[len(LOGGER_NAME)] == "."):
        _VERBOSE_FILTER.filter(record)
    return record


def _install_record_factory() -> None:
    """Wrap the process's log-record factory once (so :data:`verbose` reaches
    loggers made later, such as ``amqstomp.jms.*``)."""
    global _previous_factory
    if _previous_factory is None:
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_verbose_record)


def attach_verbose_filter() -> int:
    """Put the :class:`VerboseFilter` on every logger named ``amqstomp`` or
    ``amqstomp.*`` that exists now (a logger's filters see only its own
    records). Idempotent.

    Returns:
        int: how many loggers got it now.
    """
    added = 0
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == LOGGER_NAME or name.startswith(LOGGER_NAME + ".")):
            if _VERBOSE_FILTER not in logger.filters:
                logger.addFilter(_VERBOSE_FILTER)
                added += 1
    return added


def route_to_stomp_py(enabled: bool = True) -> None:
    """Send amqstomp's records through the ``"stomp.py"`` logger (enabled) or
    straight to the root logger (not), by making it the parent of the
    ``"amqstomp"`` logger. Idempotent; also attaches :class:`VerboseFilter`.

    Args:
        enabled (bool): route through ``"stomp.py"`` (True) or not.

    Raises:
        TypeError: ``enabled`` is not a bool.
    """
    if not isinstance(enabled, bool):
        raise TypeError("enabled must be a bool, got %r" % (enabled,))
    stomp_py = logging.getLogger(STOMP_PY_LOGGER_NAME)
    _logger.parent = stomp_py if enabled else logging.getLogger()
    # setLevel clears every logger's isEnabledFor cache (levels now come from another parent)
    stomp_py.setLevel(stomp_py.level)
    attach_verbose_filter()


def log_to_stdout(verbose_logging: bool = True) -> None:
    """Print amqstomp's records of every level to stdout (stomp.py 9.0
    ``stomp.log.log_to_stdout``): a :class:`logging.StreamHandler` on
    ``sys.stdout`` with ``"%(asctime)s - %(name)s - %(levelname)s - %(message)s"``
    on the ``"amqstomp"`` logger, whose level becomes DEBUG; sets
    :data:`verbose`. Calling it again adds no second handler.

    Args:
        verbose_logging (bool): the new value of :data:`verbose`.
    """
    global verbose
    if not any(getattr(h, "amqstomp_stdout", False) for h in _logger.handlers):
        handler = logging.StreamHandler(sys.stdout)
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        setattr(handler, "amqstomp_stdout", True)
        _logger.addHandler(handler)
    _logger.setLevel(logging.DEBUG)
    verbose = verbose_logging
    attach_verbose_filter()


_install_record_factory()
route_to_stomp_py(True)
