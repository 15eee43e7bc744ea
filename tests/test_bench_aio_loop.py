"""bench/aio.py's ``--loop uvloop``: amqstomp.aio also on uvloop's loop (API ``aio-uvloop``) in
the produce, client-individual-p1 and ack-p1000 cases, beside the default loop; a child on uvloop
produces and consumes the whole count against a real ActiveMQ. Counts and fields only."""
import argparse
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

pytest.importorskip("uvloop", reason="uvloop is not installed (the test extra has it on Linux and macOS)")

from bench import aio  # noqa: E402


def test_uvloop_runs_beside_the_default_loop_in_its_cases_only():
    assert aio.with_loop("produce", ("aio", "threaded", "stompman"), "uvloop") == (
        "aio", "aio-uvloop", "threaded", "stompman")
    assert aio.with_loop("ack-p1000", ("aio", "aio-run", "stompman"), "uvloop") == (
        "aio", "aio-uvloop", "aio-run", "stompman")
    assert aio.with_loop("client-individual-p1", ("aio", "threaded"), "uvloop") == ("aio", "aio-uvloop", "threaded")
    assert aio.with_loop("produce", ("aio", "threaded"), "asyncio") == ("aio", "threaded")
    assert aio.with_loop("consume-1mib", ("aio", "threaded", "stompman"), "uvloop") == ("aio", "threaded", "stompman")
    with pytest.raises(SystemExit):
        aio.main(["--loop", "trio", "--child", "{}"])


@pytest.mark.broker
@pytest.mark.compiled_pass_only
@pytest.mark.timeout(240)
@pytest.mark.parametrize("case, ack, prefetch", [("produce", "", 0), ("client-individual-p1", "client-individual", 1)])
def test_an_aio_child_on_uvloop_takes_the_whole_count(activemq_factory, case, ack, prefetch):
    broker = activemq_factory()
    host, port = broker.host_and_ports[0]
    args = argparse.Namespace(runs=1, count=50, big_count=5, deadline=60.0, loop="uvloop")
    runs = aio._run_case(broker, "stomp://%s:%d" % (host, port), case, ack, prefetch, ("aio",), args)
    assert sorted(runs) == ["aio", "aio-uvloop"]
    for api, results in runs.items():
        assert [r["received"] for r in results] == [50], api
