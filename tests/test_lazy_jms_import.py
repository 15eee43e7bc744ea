"""``import amqstomp`` does not load the JMS-style API (``amqstomp.jms``); the
JMS names ``amqstomp`` exports still import from it, and load ``amqstomp.jms``
then (PEP 562 ``__getattr__``). Each check runs in a fresh interpreter, so what
other tests imported does not count."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: every name ``amqstomp`` offers (``amqstomp.__all__`` held them when the JMS names were imported eagerly)
EXPORTED = [
    "Connection", "Connection10", "Connection11", "Connection12", "StompConnection10", "StompConnection11",
    "StompConnection12", "ConnectionListener", "StatsListener", "WaitingListener", "PrintingListener",
    "TestListener", "exception", "listener", "utils", "__version__", "ConnectionFactory", "Queue", "Topic",
    "AUTO_ACKNOWLEDGE", "CLIENT_ACKNOWLEDGE", "DUPS_OK_ACKNOWLEDGE", "INDIVIDUAL_ACKNOWLEDGE", "SESSION_TRANSACTED",
    # stomp.py's other names (amqstomp.install_as_stomp, tests/test_stomppy_surface.py)
    "install_as_stomp", "tuple_version", "adapter", "colours", "connect", "constants", "log",
    "WSConnection", "WSStompConnection", "protocol", "transport",
    # client-side balancing over several brokers (amqstomp.fanin, amqstomp.spreading)
    "FanInConnection", "SpreadingConnection",
]
#: what ``from amqstomp import *`` gives: stomp.py 9.0's ``from stomp import *`` (tests/test_stomppy_surface.py)
STAR = [
    "Connection", "Connection10", "Connection11", "Connection12", "StompConnection10", "StompConnection11",
    "StompConnection12", "WSConnection", "WSStompConnection", "ConnectionListener", "StatsListener", "WaitingListener",
    "PrintingListener", "tuple_version", "adapter", "connect", "constants", "exception", "listener", "log",
    "protocol", "transport", "utils",
]
JMS_NAMES = ["ConnectionFactory", "Queue", "Topic", "AUTO_ACKNOWLEDGE", "CLIENT_ACKNOWLEDGE", "DUPS_OK_ACKNOWLEDGE",
             "INDIVIDUAL_ACKNOWLEDGE", "SESSION_TRANSACTED"]


def _run(code: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_import_amqstomp_does_not_load_jms():
    _run("""
        import sys
        import amqstomp
        assert "amqstomp.jms" not in sys.modules, sorted(m for m in sys.modules if m.startswith("amqstomp"))
        conn = amqstomp.Connection  # the stomp.py API needs no JMS either
        assert "amqstomp.jms" not in sys.modules
    """)


def test_every_exported_name_still_imports_and_loads_jms_then():
    out = _run("""
        import sys
        import amqstomp
        assert sorted(amqstomp.__all__) == sorted(%r), amqstomp.__all__
        assert "amqstomp.jms" not in sys.modules
        from amqstomp import ConnectionFactory
        assert "amqstomp.jms" in sys.modules
        import amqstomp.jms as jms
        assert ConnectionFactory is jms.ConnectionFactory
        for name in %r:
            assert getattr(amqstomp, name) is getattr(jms, name), name
        for name in %r:
            getattr(amqstomp, name)
        assert set(%r) <= set(dir(amqstomp))
        try:
            amqstomp.NoSuchName
        except AttributeError as exc:
            print("AttributeError", exc)
    """ % (STAR, JMS_NAMES, EXPORTED, JMS_NAMES))
    assert "AttributeError module 'amqstomp' has no attribute 'NoSuchName'" in out


def test_star_import_of_amqstomp_is_stomp_pys_and_loads_no_jms():
    """``from amqstomp import *`` is stomp.py's ``from stomp import *``: it neither loads the JMS
    API nor binds ``Queue`` over the importer's; ``from amqstomp.jms import *`` gives the JMS names."""
    _run("""
        import sys
        from queue import Queue
        from amqstomp import *
        assert "amqstomp.jms" not in sys.modules and Queue.__module__ == "queue"
        assert Connection12 and transport.Transport and utils.parse_frame
        from amqstomp.jms import *
        import amqstomp.jms as jms
        assert ConnectionFactory is jms.ConnectionFactory and SESSION_TRANSACTED == jms.SESSION_TRANSACTED
        assert Queue("a").stomp_name == "/queue/a"
    """)
