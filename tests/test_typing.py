"""The package is typed: ``mypy --strict`` passes on it, and the stubs of the compiled modules
match what was compiled (``mypy.stubtest``)."""
import os
import subprocess
import sys

import pytest

import amqstomp

pytestmark = pytest.mark.timeout(300)

PACKAGE_DIR = os.path.dirname(os.path.abspath(amqstomp.__file__))


def test_py_typed_marker_is_shipped():
    assert os.path.exists(os.path.join(PACKAGE_DIR, "py.typed"))
    for stub in ("_codec.pyi", "_flow.pyi"):
        assert os.path.exists(os.path.join(PACKAGE_DIR, stub)), stub


def test_mypy_strict_passes(tmp_path):
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", str(tmp_path), PACKAGE_DIR],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stubs_match_the_compiled_modules(tmp_path):
    pytest.importorskip("mypy")
    if os.environ.get("AMQSTOMP_PURE_BUILD"):
        pytest.skip("a pure-Python install has no compiled modules to check the stubs against")
    # run where `import amqstomp` finds the package under test (stubtest finds nothing elsewhere
    # and then reports success on nothing)
    parent = os.path.dirname(PACKAGE_DIR)
    env = {k: v for k, v in os.environ.items() if k != "AMQSTOMP_NO_EXTENSIONS"}
    env["PYTHONPATH"] = parent
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", os.devnull,
                           "amqstomp._codec", "amqstomp._flow"],
                          cwd=parent, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checked 2 modules" in proc.stdout or "in 2 modules" in proc.stdout, proc.stdout
