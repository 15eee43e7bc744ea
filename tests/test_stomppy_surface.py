"""Every public name of stomp.py 9.0 exists after ``amqstomp.install_as_stomp()``,
with a signature that accepts what stomp.py code passes (issue 13, "Every
stomp.py program runs unchanged").

The real stomp.py's surface is read in a subprocess (``tests/stomppy_surface.py``:
in this process ``import stomp`` means amqstomp once installed) and compared
here. Names not there yet are listed in :data:`PENDING` with the reason; the
test fails on a missing name outside it, and on a PENDING name that is no
longer missing (so the list only shrinks).
"""
import importlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import amqstomp
import amqstomp.utils
from stomppy_reference import REFERENCE_VERSION, installed_version, no_reference
from stomppy_surface import check, compare, compare_star, counts, signature_problem

pytestmark = pytest.mark.timeout(120)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


#: stomp.py 9.0 names amqstomp does not have yet, by module: each key is a space-separated
#: group of problem keys (see tests/stomppy_surface.py: "Name", "Name.member", "Name().attr",
#: "Name(Base)", "*" for the whole module) and the reason. Shrink it as they come.
PENDING = {
    "stomp.adapter.multicast": {
        "*": "stomp.py's UDP multicast adapter (MulticastConnection): not planned; amqstomp speaks to brokers",
    },
    "stomp.__main__": {
        # stomp.py's client imports its multicast adapter (for -S multicast); amqstomp has none (above)
        "MulticastConnection": "stomp.py's UDP multicast adapter (MulticastConnection): not planned",
    },
}


def expand(pending):
    """``{module: {key: reason}}`` from :data:`PENDING`'s space-separated groups."""
    out = {}
    for module, groups in pending.items():
        keys = out.setdefault(module, {})
        for group, reason in groups.items():
            for key in group.split():
                assert key not in keys, "%s listed twice in PENDING[%r]" % (key, module)
                keys[key] = reason
    return out


#: the names of stomp.transport that stomp.py's ws module re-exports
_WS_REEXPORTS = ("BaseTransport", "DEFAULT_SSL_VERSION", "LINUX_KEEPALIVE_AVAIL", "MAC_KEEPALIVE_AVAIL")
#: stomp.py's Transport members its WSTransport (a BaseTransport, not a Transport) does not have
_NOT_IN_WS_TRANSPORT = ("Transport.shutdown_queue",)


def _ws_inherited(pending):
    """PENDING of stomp.adapter.ws, derived: its WSStompConnection is a
    StompConnection12 and its WSTransport a Transport (their own signatures are
    stomp.py's), and it re-exports four names of stomp.transport -- what those
    lack, it lacks, pending there with that reason, so this list shrinks with theirs."""
    flat = expand(pending)
    out = {}
    for key, reason in flat.get("stomp.connect", {}).items():
        if key.startswith("StompConnection12") and key != "StompConnection12":
            out["WSStompConnection" + key[len("StompConnection12"):]] = reason
    for key, reason in flat.get("stomp.transport", {}).items():
        if key in _WS_REEXPORTS:
            out[key] = reason
        elif key.startswith("Transport") and key != "Transport" and key not in _NOT_IN_WS_TRANSPORT:
            out["WS" + key] = reason
    return out


PENDING["stomp.adapter.ws"] = _ws_inherited(PENDING)


@pytest.fixture(scope="module")
def real_surface(tmp_path_factory):
    """stomp.py 9.0's surface, read by a subprocess that imports the real stomp.py."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "stomppy_surface.py")],
                          cwd=str(tmp_path_factory.mktemp("probe")), capture_output=True, text=True, timeout=90)
    if proc.returncode != 0 and "No module named 'stomp'" in proc.stderr:
        no_reference("stomp.py is not installed (pip install 'stomp.py==9.0.0', the test extra)")
    assert proc.returncode == 0, proc.stderr
    surface = json.loads(proc.stdout)
    assert "parse_frame" in surface["stomp.utils"], "the probe did not read stomp.py"
    return surface


@pytest.fixture
def installed():
    """``amqstomp.install_as_stomp()`` in this process, undone afterwards (the
    real stomp.py, if another test imported it, is put back)."""
    saved = {name: module for name, module in sys.modules.items() if name == "stomp" or name.startswith("stomp.")}
    for name in saved:
        del sys.modules[name]
    meta_path = list(sys.meta_path)
    amq_logger = logging.getLogger("amqstomp")
    parent = amq_logger.parent
    try:
        amqstomp.install_as_stomp()
        yield
    finally:
        for name in [n for n in sys.modules if n == "stomp" or n.startswith("stomp.")]:
            del sys.modules[name]
        sys.modules.update(saved)
        sys.meta_path[:] = meta_path
        amq_logger.parent = parent
        logging.getLogger("stomp.py").setLevel(logging.getLogger("stomp.py").level)  # clears level caches


# --------------------------------------------------------------------------- the surface


def test_every_stomp_py_name_is_there_or_pending(real_surface, installed):
    problems = compare(real_surface)
    unexpected, stale = check(problems, expand(PENDING))
    assert not unexpected, "stomp.py names missing or incompatible (fix, or add to PENDING with a reason):\n" \
        + "\n".join(unexpected)
    assert not stale, "PENDING names that are there now (remove them from PENDING):\n" + "\n".join(stale)


def test_figures(real_surface, installed):
    """Names per module (printed with -s; the report's figures)."""
    figures = counts(real_surface, compare(real_surface))
    for module, (total, present, clean) in sorted(figures.items()):
        print("%-24s %3d public names: %3d present, %3d fully compatible" % (module, total, present, clean))
    assert figures["stomp.utils"][1] == figures["stomp.utils"][0] >= 50
    for module in ("stomp.constants", "stomp.exception", "stomp.log", "stomp.listener", "stomp.colours"):
        assert figures[module][0] == figures[module][2], module


def test_a_removed_name_is_reported(real_surface, installed, monkeypatch):
    monkeypatch.delattr(amqstomp.utils, "parse_frame")
    problems = compare(real_surface)
    assert problems["stomp.utils"]["parse_frame"] == "missing"
    unexpected, _ = check(problems, expand(PENDING))
    assert "stomp.utils: parse_frame: missing" in unexpected


def test_an_incompatible_signature_is_reported(real_surface, installed, monkeypatch):
    def encode(char_data):  # no encoding parameter
        return b""

    monkeypatch.setattr(amqstomp.utils, "encode", encode)
    problems = compare(real_surface)
    assert "encoding" in problems["stomp.utils"]["encode"]


def test_a_changed_constant_and_a_member_that_is_no_method_are_reported(real_surface, installed, monkeypatch):
    monkeypatch.setattr(amqstomp.constants, "HDR_ACK", "Ack")
    monkeypatch.setattr(amqstomp.listener.TestListener, "wait_for_heartbeat", property(lambda self: None))
    problems = compare(real_surface)
    assert "HDR_ACK" in problems["stomp.constants"]
    assert problems["stomp.listener"]["TestListener.wait_for_heartbeat"] == "has no signature to compare"


def test_a_pending_name_that_is_there_now_is_reported(real_surface, installed):
    problems = compare(real_surface)
    pending = expand(PENDING)
    pending.setdefault("stomp.utils", {})["decode"] = "pretend it is missing"
    _, stale = check(problems, pending)
    assert stale == ["stomp.utils: decode: pretend it is missing"]


@pytest.mark.parametrize("real, mine, problem", [
    ([("a", "POSITIONAL_OR_KEYWORD", False)], [("a", "POSITIONAL_OR_KEYWORD", False)], None),
    ([("a", "POSITIONAL_OR_KEYWORD", False)], [("b", "POSITIONAL_OR_KEYWORD", False)], "parameter 0 is 'b'"),
    ([("a", "POSITIONAL_OR_KEYWORD", True)], [("a", "POSITIONAL_OR_KEYWORD", False)], "required"),
    ([("a", "POSITIONAL_OR_KEYWORD", True)], [], "no positional slot"),
    ([("a", "POSITIONAL_OR_KEYWORD", True)], [("args", "VAR_POSITIONAL", False), ("kw", "VAR_KEYWORD", False)], None),
    ([("a", "POSITIONAL_OR_KEYWORD", True)], [("args", "VAR_POSITIONAL", False)], "by keyword"),
    ([("k", "VAR_KEYWORD", False)], [], "no **kwargs"),
    ([], [("x", "POSITIONAL_OR_KEYWORD", False)], "requires 'x'"),
    ([], [("x", "POSITIONAL_OR_KEYWORD", True), ("y", "KEYWORD_ONLY", True)], None),
    ([("a", "POSITIONAL_OR_KEYWORD", False)], [("a", "POSITIONAL_ONLY", False)], "by keyword"),
    ([("self", "POSITIONAL_OR_KEYWORD", False), ("args", "VAR_POSITIONAL", False), ("kw", "VAR_KEYWORD", False)],
     [("self", "POSITIONAL_OR_KEYWORD", False), ("username", "POSITIONAL_OR_KEYWORD", True)], None),  # forwarder
])
def test_signature_rule(real, mine, problem):
    found = signature_problem(real, mine)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found


# --------------------------------------------------------------------------- star imports

#: names of stomp.py 9.0's star imports that amqstomp's leave out, by module, with the reason
STAR_PENDING = {
    "stomp.adapter.multicast": {
        "*": "stomp.py's UDP multicast adapter: not provided (see PENDING)",
    },
    "stomp.adapter": {
        "multicast": "stomp.py's UDP multicast adapter: not provided (see PENDING)",
    },
    "stomp.adapter.ws": {
        "websocket": "stomp.py's WebSocket library (websocket-client); amqstomp's is websockets' sans-I/O "
                     "layer, imported only when a WebSocket connection is made (the 'ws' extra)",
    },
    "stomp.__main__": {
        "MulticastConnection": "stomp.py's UDP multicast adapter: not provided (see PENDING)",
        "docopt": "stomp.py's command line parser (the docopt package); amqstomp's client uses argparse",
    },
}


@pytest.fixture(scope="module")
def real_star(tmp_path_factory):
    """What ``from stomp.X import *`` gives with the real stomp.py 9.0 (a subprocess)."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "stomppy_surface.py"), "--star"],
                          cwd=str(tmp_path_factory.mktemp("probe")), capture_output=True, text=True, timeout=90)
    if proc.returncode != 0 and "No module named 'stomp'" in proc.stderr:
        no_reference("stomp.py is not installed (pip install 'stomp.py==9.0.0', the test extra)")
    assert proc.returncode == 0, proc.stderr
    star = json.loads(proc.stdout)
    if star.get("stomp.utils") is None:  # the probe found no stomp to import (Python 3.9: the test extra has none)
        no_reference("stomp.py is not installed (pip install 'stomp.py==9.0.0', the test extra)")
    assert "re" in star["stomp.utils"] and "parse_frame" in star["stomp.utils"], "the probe did not read stomp.py"
    return star


def test_star_imports_give_stomp_pys_names(real_star, installed):
    """stomp.py's modules have no ``__all__``: ``from stomp.utils import *`` also hands out
    what they imported (``re``, ``os``, ``socket``, ``threading``...). Every ``stomp.*``
    module amqstomp provides gives the same set of names, the modules and standard-library
    objects among them the same objects; nothing more (a name more could shadow the
    importer's own: ``Queue``), nothing less (``NameError`` in code written for stomp.py)."""
    problems = compare_star(real_star)
    unexpected = ["%s: %s: %s" % (module, name, why) for module, found in sorted(problems.items())
                  for name, why in sorted(found.items()) if name not in STAR_PENDING.get(module, {})]
    assert not unexpected, "star imports that differ from stomp.py 9.0's:\n" + "\n".join(unexpected)
    stale = ["%s: %s" % (module, name) for module, names in sorted(STAR_PENDING.items()) for name in names
             if name not in problems.get(module, {})]
    assert not stale, "STAR_PENDING names that are no problem any more:\n" + "\n".join(stale)


def test_a_star_import_name_left_out_is_reported(real_star, installed, monkeypatch):
    monkeypatch.setattr(amqstomp.utils, "__all__", [n for n in amqstomp.utils.__all__ if n != "re"])
    assert compare_star(real_star)["stomp.utils"]["re"] == "missing from the star import"
    monkeypatch.setattr(amqstomp.utils, "__all__", amqstomp.utils.__all__ + ["clamp_wait"])
    assert compare_star(real_star)["stomp.utils"]["clamp_wait"] == "not in stomp.py's star import"


def test_stomp_py_helpers_star_importing_stomp_utils_run(installed):
    """A stomp.py user's test helper, as such helpers are written: it star-imports stomp.utils
    and uses what stomp.py's module imported."""
    namespace = {}
    exec(textwrap.dedent("""
        from stomp.utils import *

        def frame_bytes(cmd, headers, body):
            return b"".join(convert_frame(Frame(cmd, headers, body)))

        def header_names(data):
            return re.findall(r"^([a-z-]+):", data.decode(), re.M)

        ids = [str(uuid.uuid4()) for _ in range(2)]
        names = header_names(frame_bytes("SEND", {"destination": "/queue/a", "receipt": ids[0]}, "x"))
        assert names == ["destination", "receipt"], names
        assert isinstance(threading.current_thread(), threading.Thread) and os.getpid() > 0
        assert socket.AF_INET and copy.copy([1]) == [1] and queue.Queue().empty()
    """), namespace)


# --------------------------------------------------------------------------- install_as_stomp


def test_install_aliases_the_modules(installed):
    import stomp
    import stomp.transport
    import stomp.utils
    from stomp.listener import TestListener
    from stomp.utils import parse_frame

    assert stomp is amqstomp
    assert stomp.utils is amqstomp.utils and parse_frame is amqstomp.utils.parse_frame
    assert TestListener is amqstomp.listener.TestListener
    assert stomp.transport is sys.modules["amqstomp.transport"]
    assert stomp.WSConnection is amqstomp.WSConnection and stomp.adapter.ws is sys.modules["amqstomp.adapter.ws"]
    assert sys.modules["stomp.adapter.ws"] is stomp.adapter.ws
    for name in ("connect", "protocol", "constants", "exception", "log", "adapter", "colours"):
        assert getattr(stomp, name) is importlib.import_module("amqstomp." + name), name
        assert sys.modules["stomp." + name] is getattr(stomp, name)
    assert stomp.connect.StompConnection12 is amqstomp.Connection12
    assert stomp.log.verbose is False


def test_install_is_idempotent(installed):
    before = list(sys.meta_path)
    amqstomp.install_as_stomp()
    amqstomp.install_as_stomp()
    assert sys.meta_path == before
    assert sys.modules["stomp"] is amqstomp


def test_other_stomp_names_are_the_amqstomp_modules_not_copies(installed):
    import stomp.uri

    assert stomp.uri is sys.modules["amqstomp.uri"]
    assert stomp.uri.__spec__.name == "amqstomp.uri"
    with pytest.raises(ModuleNotFoundError, match="no 'amqstomp.no_such_module'"):
        importlib.import_module("stomp.no_such_module")


@pytest.mark.parametrize("name, text", [
    ("stomp.adapter.multicast", "multicast"),
])
def test_modules_not_provided_say_so(installed, name, text):
    with pytest.raises(ImportError, match=text):
        importlib.import_module(name)


def test_stomp_main_is_amqstomps_client(installed):
    from stomp.__main__ import StompCLI, main

    import amqstomp.__main__
    import amqstomp.cli.shell

    assert sys.modules["stomp.__main__"] is amqstomp.__main__
    assert StompCLI is amqstomp.cli.shell.StompCLI and main is amqstomp.__main__.main


def test_tuple_version(installed, monkeypatch):
    import stomp

    monkeypatch.setattr(amqstomp, "__version__", "1.2.3rc1")
    stomp.tuple_version()
    assert stomp.__version__ == (1, 2, 31)  # stomp.py's rule: non-digits dropped, then split at dots
    stomp.tuple_version()
    assert stomp.__version__ == (1, 2, 31)


def _run(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_install_refuses_when_stomp_py_is_imported():
    proc = _run("""
        try:
            import stomp
        except ImportError:
            print("SKIP")
            raise SystemExit(0)
        import amqstomp
        from amqstomp.exception import ModuleConflictError, StompException
        try:
            amqstomp.install_as_stomp()
        except ModuleConflictError as exc:
            assert isinstance(exc, ImportError) and isinstance(exc, StompException)
            print("REFUSED", exc)
        import sys
        assert sys.modules["stomp"] is stomp and stomp is not amqstomp
    """)
    assert proc.returncode == 0, proc.stderr
    if "SKIP" in proc.stdout:
        pytest.skip("stomp.py is not installed")
    assert "REFUSED" in proc.stdout and "stomp.py is already imported" in proc.stdout


def test_a_stomp_py_program_runs_its_imports_unchanged():
    proc = _run("""
        import amqstomp
        amqstomp.install_as_stomp()
        import stomp
        import stomp.connect
        from stomp import ConnectionListener, StatsListener, WaitingListener, PrintingListener
        from stomp.listener import TestListener, HeartbeatListener, Publisher
        from stomp.utils import *
        from stomp.constants import *
        from stomp.exception import StompException, ConnectFailedException
        import stomp.log as log
        conn = stomp.Connection([("127.0.0.1", 1)])
        assert isinstance(conn, stomp.connect.StompConnection11)
        assert parse_frame(b"MESSAGE\\nid:1\\n\\nhi").headers == {"id": "1"} and HDR_ID == "id"
        print("OK", stomp.__name__)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "OK amqstomp" in proc.stdout


# --------------------------------------------------------------------------- the differential tests' guard

DIFFERENTIAL = ["tests/test_stomppy_compat.py", "tests/test_stomppy_helpers.py"]


def _collect(tmp_path, env=None, before=""):
    """``pytest --collect-only`` of the differential test modules, in a process of its own
    (``before``: Python run first in it); returns (exit status, output)."""
    code = "import sys, pytest\n%s\nsys.exit(pytest.main(%r))" % (
        before, ["-p", "no:cacheprovider", "--collect-only", "-q", "-rs"] + DIFFERENTIAL)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_real_stomp_py_in_a_path_named_amqstomp_is_the_reference(tmp_path):
    """scripts/test.sh installs the real stomp.py in a venv under ``amqstomp-test.*``: the
    differential tests run there (the guard goes by module identity, not by path)."""
    real = subprocess.run([sys.executable, "-c", "import stomp, os; print(os.path.dirname(stomp.__file__))"],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    if real.returncode != 0:
        pytest.skip("stomp.py is not installed")
    site = tmp_path / "amqstomp-test.x1y2z3" / "site-packages"
    site.mkdir(parents=True)
    shutil.copytree(real.stdout.strip(), str(site / "stomp"), ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), ROOT, os.path.join(ROOT, "tests")])
    status, out = _collect(tmp_path, env, "import stomp; assert 'amqstomp-test.' in stomp.__file__, stomp.__file__")
    assert status == 0 and "skipped" not in out.lower(), out
    assert re.search(r"\b(\d{2,}) tests? collected", out), out


def test_differential_tests_that_would_skip_fail_the_run_when_stomp_py_9_is_installed(tmp_path):
    """``install_as_stomp()`` in effect before collection: no reference in that process. With
    stomp.py 9.0 installed the run fails (collection error) instead of skipping them."""
    if installed_version() != REFERENCE_VERSION:
        pytest.skip("stomp.py %s is not installed" % REFERENCE_VERSION)
    status, out = _collect(tmp_path, before="import amqstomp; amqstomp.install_as_stomp()")
    assert status not in (0, 5), out
    assert "stomp.py 9.0.0 is installed but the differential tests would be skipped" in out, out
    assert "install_as_stomp() ran" in out, out
