"""scripts/find_pythons.py: which interpreter scripts/test.sh builds and tests each declared
Python version's wheel with, and what happens when one is missing (CI: a failure).

The interpreters here are stand-ins (shell scripts answering the script's probe), in a pyenv
directory and on a PATH of the test's own, for versions no machine has (3.98, 3.99): what the
machine really has plays no part. (scripts/test.sh copies the script next to the installed
suite; elsewhere outside a checkout these tests skip.)"""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "find_pythons.py")
PYPROJECT = """[project]
name = "x"
version = "0"
requires-python = "%s"
classifiers = [%s]
"""


@pytest.fixture
def tree(tmp_path):
    if not os.path.exists(SCRIPT):
        # a checkout has it (scripts/test.sh runs it); the installed suite gets a copy
        assert not os.path.exists(os.path.join(ROOT, "scripts", "test.sh")), "no scripts/find_pythons.py"
        pytest.skip("not a checkout: no scripts/find_pythons.py")
    pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    return tmp_path


def _pyproject(tree, requires, minors):
    path = tree / "pyproject.toml"
    path.write_text(PYPROJECT % (requires, ", ".join('"Programming Language :: Python :: 3.%d"' % m
                                                     for m in minors)))
    return str(path)


def _interpreter(path, answer, exit_code=0):
    """A stand-in: prints ``answer`` to the probe (or exits ``exit_code``, as a pyenv shim for a
    version that is not selected does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n%s\nexit %d\n" % ('echo "%s"' % answer if answer else ":", exit_code))
    path.chmod(0o755)
    return str(path)


def _run(tree, pyproject, *args, path_dirs=()):
    env = dict(os.environ, PYENV_ROOT=str(tree / "pyenv"), PATH=os.pathsep.join([str(d) for d in path_dirs]))
    return subprocess.run([sys.executable, SCRIPT, "--pyproject", pyproject, *args], env=env,
                          capture_output=True, text=True, timeout=30)


def test_the_newest_pyenv_patch_release_that_answers_is_taken(tree):
    pyproject = _pyproject(tree, ">=3.98", [98])
    _interpreter(tree / "pyenv/versions/3.98.2/bin/python3.98", "3.98 ok")
    newest = _interpreter(tree / "pyenv/versions/3.98.10/bin/python3.98", "3.98 ok")
    _interpreter(tree / "pyenv/versions/3.98-dev/bin/python3.98", "3.98 ok")  # not a release
    out = _run(tree, pyproject, "--require-all")
    assert (out.returncode, out.stdout) == (0, "3.98 found %s\n" % newest), out.stderr


def test_a_shim_that_fails_and_an_unfit_build_are_passed_over(tree):
    pyproject = _pyproject(tree, ">=3.98", [98])
    _interpreter(tree / "shims/python3.98", None, exit_code=127)  # pyenv: "command not found"
    _interpreter(tree / "pyenv/versions/3.98.1/bin/python3.98", "3.98 unfit")  # no Python.h, or free-threaded
    _interpreter(tree / "wrong/python3.98", "3.97 ok")  # another version under the name
    usable = _interpreter(tree / "bin/python3.98", "3.98 ok")
    out = _run(tree, pyproject, "--require-all", path_dirs=[tree / "shims", tree / "wrong", tree / "bin"])
    assert (out.returncode, out.stdout) == (0, "3.98 found %s\n" % usable), out.stderr


def test_a_declared_version_without_interpreter_is_named_and_fails_with_require_all(tree):
    pyproject = _pyproject(tree, ">=3.98", [98, 99])
    found = _interpreter(tree / "bin/python3.98", "3.98 ok")
    lenient = _run(tree, pyproject, path_dirs=[tree / "bin"])
    assert (lenient.returncode, lenient.stdout) == (0, "3.98 found %s\n3.99 missing\n" % found)
    assert "no usable CPython 3.99" in lenient.stderr
    strict = _run(tree, pyproject, "--require-all", path_dirs=[tree / "bin"])
    assert strict.returncode == 1 and strict.stdout == lenient.stdout


@pytest.mark.parametrize("requires, minors, says", [
    (">=3.98", [98, 100], "classifiers name Python 3.98, 3.100"),  # 3.99 left out
    (">=3.98", [97, 98], "classifiers name Python 3.97, 3.98"),  # below requires-python
    (">=3.98", [], "no 'Programming Language :: Python :: 3.X' classifier"),
    ("~=3.98", [98], "expected one '>=3.X' lower bound"),
])
def test_declarations_that_disagree_are_refused(tree, requires, minors, says):
    out = _run(tree, _pyproject(tree, requires, minors))
    assert out.returncode == 2 and says in out.stderr, (out.returncode, out.stderr)
    assert out.stdout == ""
