"""Differential fuzzing: the compiled codec and its pure-Python twin must agree on every input.

Parsing: the same stream cut into the same ``feed()`` chunks gives, after every call, the same
frames, or the same error (type, message, offset, the ``.frames`` before it), and the same
``offset`` / ``buffered`` / ``version``. Encoding: ``encode_frame``, ``encode_headers`` and
``FrameHead`` give equal bytes or the same error. The generators (valid frames of every version
with random headers, escapes, bodies and content-lengths, CONNECTED version switches, bodies
past the compiled parser's 1 MiB direct fill, then mutations, truncations and random cuts) are
bench/fuzz_codec.py's, driven here by hypothesis (so a failure shrinks and replays); that file
runs the same comparison for minutes. Skipped when the compiled codec is not built or not in use
(a pure wheel, AMQSTOMP_NO_EXTENSIONS=1): there is nothing to compare.
"""
import os
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from bench import fuzz_codec  # noqa: E402

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(fuzz_codec._codec_c is None, reason="compiled codec not built"),
    pytest.mark.skipif(bool(os.environ.get("AMQSTOMP_NO_EXTENSIONS")),
                       reason="AMQSTOMP_NO_EXTENSIONS: the compiled codec is not in use"),
]

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_agree(case, replay=""):
    diff = fuzz_codec.compare(case)
    if diff is not None:
        twin, compiled = diff
        pytest.fail("compiled codec and twin disagree on %s\n twin:     %s\n compiled: %s%s"
                    % (fuzz_codec._clip(case, 4000), fuzz_codec._clip(twin), fuzz_codec._clip(compiled),
                       "\n replay: python bench/fuzz_codec.py " + replay if replay else ""))


def seeded(seed, kind):
    return fuzz_codec.gen_case(random.Random(seed), kind), "--case %d --kind %s" % (seed, kind)


# Cases from a seed: the generator's own distribution (bench/fuzz_codec.py's, where
# `--case SEED --kind K` replays one); hypothesis's random (below) leans to short, simple
# choices, which finds other things and shrinks, but hits a given fault less often.
seeds = st.integers(min_value=0, max_value=2 ** 64 - 1)


@settings(FUZZ, max_examples=1500)
@given(seed=seeds)
def test_parsers_agree_on_generated_streams(seed):
    assert_agree(*seeded(seed, "small"))


@settings(FUZZ, max_examples=500)
@given(rnd=st.randoms(use_true_random=False))
def test_parsers_agree_on_shrinkable_streams(rnd):
    assert_agree(fuzz_codec.gen_parse_case(rnd, big=False))


@settings(FUZZ, max_examples=600)
@given(seed=seeds)
def test_parsers_agree_on_message_streams(seed):
    """A broker's MESSAGE stream: the compiled parser starts each MESSAGE's headers from the
    previous one's names; frames that leave one out, add, repeat or reorder one must come out
    as the twin's (same names, order, values, first of a repeated name)."""
    assert_agree(*seeded(seed, "messages"))


@settings(FUZZ, max_examples=300)
@given(rnd=st.randoms(use_true_random=False))
def test_parsers_agree_on_shrinkable_message_streams(rnd):
    assert_agree(fuzz_codec.gen_messages_case(rnd))


@settings(FUZZ, max_examples=40)
@given(seed=seeds)
def test_parsers_agree_around_a_big_body(seed):
    """A body past the compiled parser's 1 MiB direct-fill threshold, cut anywhere."""
    assert_agree(*seeded(seed, "big"))


@settings(FUZZ, max_examples=300)
@given(
    data=st.binary(max_size=200) | st.lists(st.sampled_from(fuzz_codec.FRAGMENTS + (b"\n", b"\r\n", b"\x00",
                                                                                     b"MESSAGE\n", b"SEND\n")),
                                            max_size=30).map(b"".join),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
    version=st.sampled_from(fuzz_codec.VERSIONS),
    max_body=st.sampled_from([1, 5, 100, fuzz_codec._codec_py.DEFAULT_MAX_BODY_LENGTH]),
)
def test_parsers_agree_on_raw_bytes(data, cuts, version, max_body):
    points = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    chunks = [data[a:b] for a, b in zip(points, points[1:])] or [b""]
    assert_agree({"kind": "parse", "version": version, "limits": {"max_body_length": max_body},
                  "chunks": chunks, "kinds": ["bytes"] * len(chunks)})


@settings(FUZZ, max_examples=800)
@given(seed=seeds)
def test_encoders_agree(seed):
    assert_agree(*seeded(seed, "encode"))


@settings(FUZZ, max_examples=300)
@given(rnd=st.randoms(use_true_random=False))
def test_encoders_agree_shrinkable(rnd):
    assert_agree(fuzz_codec.gen_encode_case(rnd))


def test_a_disagreement_is_reported():
    """The harness sees a difference: a twin parser that drops every header is caught."""
    class Lossy:
        class FrameParser(fuzz_codec._codec_py.FrameParser):
            def feed(self, data):
                frames = super().feed(data)
                for frame in frames:
                    frame.headers = {}
                return frames

    case = {"kind": "parse", "version": "1.2", "limits": {}, "chunks": [b"MESSAGE\nk:v\n\n\x00"], "kinds": ["bytes"]}
    assert fuzz_codec.parse_outcome(Lossy, case) != fuzz_codec.parse_outcome(fuzz_codec._codec_c, case)
    assert fuzz_codec.compare(case) is None


def test_bench_run_writes_nothing_when_they_agree(tmp_path):
    counts = fuzz_codec.run(1.0, seed=1234, out_dir=str(tmp_path / "out"), quiet=True)
    assert counts["cases"] > 0 and counts["disagreements"] == 0 and counts["crashes"] == 0
    assert not (tmp_path / "out").exists()
