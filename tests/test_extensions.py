"""A compiled module that is there but does not load is not replaced by its pure-Python twin in
silence (seen: a ``_flow`` .so of 14 KB without ``PyInit__flow``, left by two installs building
from one tree at once): the selector (``amqstomp.codec``, ``amqstomp.flow``) warns once, naming
the module and the import error. A compiled module that is not there at all, and
``AMQSTOMP_NO_EXTENSIONS=1``, stay quiet.

Each case runs in a fresh interpreter (without site-packages) over a copy of the package under
test in a temporary directory, where the compiled module is replaced by a broken file.
"""
import importlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import amqstomp

pytestmark = pytest.mark.timeout(120)

PACKAGE_DIR = os.path.dirname(os.path.abspath(amqstomp.__file__))
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so

PROBE = textwrap.dedent("""
    import warnings
    warnings.simplefilter("default")
    import amqstomp, amqstomp.codec as codec, amqstomp.flow as flow
    import importlib
    importlib.import_module("amqstomp.flow")  # imported again: no second warning
    print("FILE", amqstomp.__file__)
    print("IMPL", codec.IMPLEMENTATION, flow.IMPLEMENTATION)
""")


def _foreign_extension():
    """A loadable extension module of the standard library (a shared object without
    ``PyInit__flow``/``PyInit__codec``: what the broken installs left)."""
    for name in ("_ssl", "_ctypes", "_hashlib", "select", "_json", "math"):
        path = getattr(importlib.import_module(name), "__file__", None) or ""
        if path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return path
    pytest.skip("no standard-library extension module file to stand in for a broken one")


def _copy(tmp_path, broken=(), absent=()):
    """A copy of the package under test in ``tmp_path``: its compiled modules named in
    ``broken`` are shared objects that are no such module (a stdlib extension's file),
    those in ``absent`` are not there (nor built)."""
    target = tmp_path / "amqstomp"
    shutil.copytree(PACKAGE_DIR, str(target), ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    core = target / "_core"  # where the compiled modules live
    for found in list(core.iterdir()):
        if found.name.split(".", 1)[0] in list(broken) + list(absent) and found.name.endswith((".so", ".pyd")):
            found.unlink()
    for name in broken:
        shutil.copyfile(_foreign_extension(), str(core / (name + SUFFIX)))
    return str(tmp_path)


def _probe(root, no_extensions=False):
    env = {k: v for k, v in os.environ.items() if k not in ("AMQSTOMP_NO_EXTENSIONS", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = root
    if no_extensions:
        env["AMQSTOMP_NO_EXTENSIONS"] = "1"
    # -S: no site-packages, so no editable install's finder answering for the modules taken out
    proc = subprocess.run([sys.executable, "-S", "-c", PROBE], cwd=root, env=env, capture_output=True, text=True,
                          timeout=100)
    assert proc.returncode == 0, proc.stderr
    assert "FILE " + os.path.join(root, "amqstomp", "__init__.py") in proc.stdout, proc.stdout  # the copy
    impl = proc.stdout.split("IMPL ", 1)[1].split()
    return impl, [line for line in proc.stderr.splitlines() if "RuntimeWarning" in line], proc.stderr


def test_a_broken_compiled_module_warns_once_naming_the_import_error(tmp_path):
    root = _copy(tmp_path, broken=["_flow"])
    impl, warned, stderr = _probe(root)
    assert impl[1] == "python"
    assert len(warned) == 1, stderr
    assert "amqstomp._core._flow is installed but does not load (ImportError: " in warned[0], warned
    assert "PyInit__flow" in warned[0], warned  # the import error's own words
    assert "pure-Python twin" in warned[0] and "AMQSTOMP_NO_EXTENSIONS=1" in warned[0]


def test_both_broken_each_warns(tmp_path):
    root = _copy(tmp_path, broken=["_codec", "_flow"])
    impl, warned, stderr = _probe(root)
    assert impl == ["python", "python"]
    assert len(warned) == 2, stderr
    assert "amqstomp._core._codec is installed but does not load" in warned[0] + warned[1]


def test_no_extensions_chooses_the_twins_quietly(tmp_path):
    root = _copy(tmp_path, broken=["_codec", "_flow"])
    impl, warned, stderr = _probe(root, no_extensions=True)
    assert impl == ["python", "python"] and warned == [], stderr


def test_a_compiled_module_that_is_not_there_is_no_news(tmp_path):
    root = _copy(tmp_path, absent=["_codec", "_flow"])
    impl, warned, stderr = _probe(root)
    assert impl == ["python", "python"] and warned == [], stderr
