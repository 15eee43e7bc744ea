"""The API reference shows every public method of the classes it documents.

mkdocstrings renders a page block's ``members:`` list name by name and silently skips a name
the documented object does not have, even in ``mkdocs build --strict``: ``connect``, ``send``,
``begin``, ``commit``, ``abort`` and ``wait_for_receipt`` were listed under ``BaseConnection``,
which does not define them, and were missing from the stomp.py API page. ``scripts/api_internals.py
--check`` (run by ``bash scripts/docs.sh`` before the build) now fails on a name listed where it is
not, and counts a public name documented only where a block really shows it.

It needs the docs extra (griffe, PyYAML): these tests run it with the docs virtual environment
(``AMQSTOMP_DOCS_VENV``, else ``.venv-docs``, which ``bash scripts/docs.sh`` makes), and skip
without one or outside a checkout (``scripts/`` is not shipped).
"""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "api_internals.py")


@pytest.fixture(scope="module")
def docs_python():
    if not os.path.exists(SCRIPT):
        pytest.skip("not a checkout: no scripts/api_internals.py")
    venv = os.environ.get("AMQSTOMP_DOCS_VENV") or os.path.join(ROOT, ".venv-docs")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        pytest.skip("no docs virtual environment (%s): bash scripts/docs.sh makes it" % venv)
    return python


def _run(python, code):
    proc = subprocess.run([python, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=150, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_check_passes(docs_python):
    proc = subprocess.run([docs_python, SCRIPT, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 names in 0 classes" in proc.stdout, proc.stdout
    assert "Listed on the API pages but not there (mkdocstrings shows nothing for them): 0" in proc.stdout


def test_the_connections_frame_methods_are_shown(docs_python):
    """The six methods of the issue, for each connection class: shown by a block of the class
    or of a base class that has them."""
    out = _run(docs_python, """
        import sys
        sys.path.insert(0, "scripts")
        import griffe
        import api_internals as a

        package = griffe.load("amqstomp", search_paths=["."], resolve_aliases=True)
        docs = a.documented(package)
        for name in ("StompConnection10", "StompConnection11", "StompConnection12"):
            cls = package["connection." + name]
            for method in ("connect", "send", "begin", "commit", "abort", "wait_for_receipt", "disconnect"):
                where = [w.path for w in [cls] + list(cls.mro()) if a._shown(docs, w, method)]
                assert where, (name, method)
                print(name, method, where[0])
    """)
    assert "StompConnection12 commit amqstomp.protocol.BaseProtocol" in out, out


def test_a_name_listed_under_a_class_without_it_is_found(docs_python, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""
        ::: amqstomp.connection.BaseConnection
            options:
              inherited_members: true
              members:
                - connect
                - send
                - set_listener

        ::: amqstomp.listener
            options:
              members:
                - ConnectionListener
                - NoSuchListener
    """))
    out = _run(docs_python, """
        import sys
        sys.path.insert(0, "scripts")
        import griffe
        import api_internals as a

        package = griffe.load("amqstomp", search_paths=["."], resolve_aliases=True)
        print(a.listed_but_absent(package, [%r]))
        docs = a.documented(package, [%r])
        print(sorted(docs["amqstomp.connection.BaseConnection"]))
    """ % (str(page), str(page)))
    assert "('amqstomp.connection.BaseConnection', 'connect'), ('amqstomp.connection.BaseConnection', 'send'), " \
           "('amqstomp.listener', 'NoSuchListener')" in out, out
    assert "['set_listener']" in out, out  # what the block shows, not what it lists
