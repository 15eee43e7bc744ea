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
        assert os.path.exists(os.path.join(PACKAGE_DIR, "_core", stub)), stub


def _where(tmp_path):
    """(cwd, env) in which ``import amqstomp`` finds the package under test: an installed
    one from a neutral directory, a checkout from its root."""
    env = {k: v for k, v in os.environ.items() if k not in ("AMQSTOMP_NO_EXTENSIONS", "PYTHONPATH")}
    if "site-packages" in PACKAGE_DIR.split(os.sep):
        return str(tmp_path), env
    parent = os.path.dirname(PACKAGE_DIR)
    env["PYTHONPATH"] = parent
    return parent, env


def test_mypy_strict_passes(tmp_path):
    pytest.importorskip("mypy")
    cwd, env = _where(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", str(tmp_path / "cache"), "-p", "amqstomp"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues found" in proc.stdout


def test_stubs_match_the_compiled_modules(tmp_path):
    pytest.importorskip("mypy")
    if os.environ.get("AMQSTOMP_PURE_BUILD"):
        pytest.skip("a pure-Python install has no compiled modules to check the stubs against")
    # stubtest must run where `import amqstomp` finds the package under test: elsewhere it
    # finds nothing and reports success on nothing (hence the module count check)
    cwd, env = _where(tmp_path)
    found = subprocess.run([sys.executable, "-c", "import amqstomp._core._codec as m; print(m.__file__)"],
                           cwd=cwd, env=env, capture_output=True, text=True, timeout=60).stdout.strip()
    assert os.path.dirname(found) == os.path.join(PACKAGE_DIR, "_core"), (found, PACKAGE_DIR)
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", os.devnull,
                           "amqstomp._core._codec", "amqstomp._core._flow"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in 2 modules" in proc.stdout, proc.stdout


def test_a_misspelt_ack_mode_fails_type_checking(tmp_path):
    """subscribe(ack=...) is typed with the STOMP ack modes (amqstomp.connection.AckMode)."""
    pytest.importorskip("mypy")
    cwd, env = _where(tmp_path)
    program = tmp_path / "user_program.py"
    program.write_text("import amqstomp\n"
                       "c = amqstomp.Connection12([('127.0.0.1', 61613)])\n"
                       "c.subscribe('/queue/a', id='1', ack='client-individual')\n"
                       "c.subscribe('/queue/a', id='2', ack='clint')\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), str(program)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "user_program.py:4:" in errors[0] and "clint" in errors[0], proc.stdout


AIO_PROGRAM = '''import asyncio
from typing import List

import amqstomp.aio
from amqstomp.exception import BrokerError
from amqstomp.flow import RedeliveryPolicy


async def handle(message: amqstomp.aio.Message) -> None:
    print(message.message_id, message.delivery_count)


def report(error: Exception, message: amqstomp.aio.Message) -> None:
    print(type(error).__name__, message.message_id)


async def main() -> List[bytes]:
    got: List[bytes] = []
    async with amqstomp.aio.connect("stomp://127.0.0.1:61613", heartbeats=(1000, 1000)) as client:
        try:
            await client.send("/queue/a", b"x", {"persistent": "true"}, timeout=5.0)
        except BrokerError as exc:
            print(exc.reason)
        async with client.subscribe("/queue/a", ack="client-individual", prefetch_size=1) as sub:
            async for message in sub:
                body = message.body
                got.append(body if isinstance(body, bytes) else body.encode())
                await message.ack()
                break
            one: amqstomp.aio.Message = await sub.get(timeout=1.0)
            await one.nack()
        async with client.transaction(timeout=5.0) as tx:
            await tx.send("/queue/b", "text")
        async with client.subscribe("/queue/c", ack="client-individual",
                                    redelivery_policy=RedeliveryPolicy(maximum_redeliveries=2)) as handled:
            await handled.run(handle, concurrency=4, on_error=report)
    return got


asyncio.run(main())
'''


def test_an_asyncio_user_program_passes_mypy_strict(tmp_path):
    """amqstomp.aio is typed for its users: a program using connect, send, subscribe
    (async with / async for), ack, nack, a transaction and the handler form (``run``) passes
    ``mypy --strict``; a misspelt ack mode fails it, and so does a handler that is no coroutine."""
    pytest.importorskip("mypy")
    cwd, env = _where(tmp_path)
    good = tmp_path / "aio_program.py"
    good.write_text(AIO_PROGRAM)
    bad = tmp_path / "aio_bad.py"
    bad.write_text(AIO_PROGRAM.replace('ack="client-individual"', 'ack="clint"'))
    sync = tmp_path / "aio_sync_handler.py"
    sync.write_text(AIO_PROGRAM.replace("async def handle(", "def handle("))
    for program, code in ((sync, 1), (good, 0), (bad, 1)):
        proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                               "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), str(program)],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=280)
        assert proc.returncode == code, proc.stdout + proc.stderr
    assert "clint" in proc.stdout
