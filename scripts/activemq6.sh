#!/usr/bin/env bash
# Installs ActiveMQ 6.1.7, the second ActiveMQ Classic the tests run on (amqstomp.testing's
# distribution="6.1", AMQSTOMP_ACTIVEMQ_DISTRIBUTION=6.1): Apache's activemq-all jar and the log4j 2
# jars it logs through, as the `jmspy` wheel on PyPI ships them (Debian packages only 5.17).
#
#   bash scripts/activemq6.sh [PYTHON]     PYTHON: one with pip (default: .venv's, else python3)
#
# `pip download --no-deps jmspy==0.1.1` into a temporary directory, then the three jars are
# extracted into the cache directory, outside the source tree:
#   ${AMQSTOMP_ACTIVEMQ6_HOME:-${XDG_CACHE_HOME:-~/.cache}/amqstomp/activemq-6.1.7}
# (amqstomp/testing/_distribution.py looks there) and each is checked against its SHA-256 below
# (the same digests as _distribution.ACTIVEMQ6_JARS). Nothing is downloaded when they are there.
# Run by scripts/setup.sh and scripts/test.sh; safe to run again.
# Exit status: 0 installed (or already there); 1 it could not be fetched or verified. Where
# AMQSTOMP_REQUIRE_ACTIVEMQ6=1 (.ci/run sets it) the callers fail on 1; elsewhere they warn and
# the 6.1 runs are left out, saying so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

WHEEL_REQ="jmspy==0.1.1"
DEST=${AMQSTOMP_ACTIVEMQ6_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/amqstomp/activemq-6.1.7}
PY=${1:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
fi

# verify DIR: every jar there with its digest (prints what is wrong; status 1 if anything is)
verify() {
  "$PY" - "$1" <<'EOF'
import hashlib, os, sys
JARS = {
    "activemq-all-6.1.7.jar": "6f009d96851bf73c8ec55285949d35f6fce544bc2770fd6fe0023180052efa2f",
    "log4j-api-2.25.0.jar": "0393e32167240eb56597a2016446928755729f1a181046cab5d42a81d0e3d909",
    "log4j-core-2.25.0.jar": "05d3eecb9e509fd47117c0fb43c7b4b2989b28ecd5543ad5feff2e4903d3c921",
}
bad = []
for name, digest in JARS.items():
    path = os.path.join(sys.argv[1], name)
    try:
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        bad.append("%s: missing" % name)
        continue
    if got != digest:
        bad.append("%s: sha256 %s, expected %s" % (name, got, digest))
if bad:
    print("; ".join(bad))
    sys.exit(1)
EOF
}

if verify "$DEST" >/dev/null 2>&1; then
  echo "activemq6: ActiveMQ 6.1.7 jars in $DEST (verified)"
  exit 0
fi

fail() {
  echo "activemq6: ERROR: $*" >&2
  echo "activemq6: ActiveMQ 6.1.7 is not installed: the tests on ActiveMQ 6.1 cannot run. Fix the cause above and run" >&2
  echo "activemq6:   bash scripts/activemq6.sh   (needs PyPI through pip; or put activemq-all-6.1.7.jar," >&2
  echo "activemq6:   log4j-api-2.25.0.jar and log4j-core-2.25.0.jar from the jmspy 0.1.1 wheel in $DEST" >&2
  echo "activemq6:   or in a directory named by AMQSTOMP_ACTIVEMQ6_HOME)" >&2
  exit 1
}

"$PY" -m pip --version >/dev/null 2>&1 || fail "$PY has no pip"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/amqstomp-activemq6.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
echo "activemq6: pip download --no-deps $WHEEL_REQ (12 MB; it ships ActiveMQ 6.1.7's activemq-all jar)"
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$TMP/wheel" "$WHEEL_REQ" \
  || fail "pip download $WHEEL_REQ failed (no network, or no access to PyPI?)"
WHL=$(ls "$TMP"/wheel/jmspy-*.whl 2>/dev/null | head -n 1)
[ -n "$WHL" ] || fail "pip download left no jmspy wheel"
"$PY" - "$WHL" "$TMP/jars" <<'EOF' || fail "the wheel $(basename "$WHL") lacks the expected jars"
import os, sys, zipfile
wheel, out = sys.argv[1:3]
os.makedirs(out)
want = ("activemq-all-6.1.7.jar", "log4j-api-2.25.0.jar", "log4j-core-2.25.0.jar")
with zipfile.ZipFile(wheel) as zf:
    for name in want:
        with zf.open("jmspy/libs/" + name) as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
EOF
why=$(verify "$TMP/jars") || fail "the jars of $(basename "$WHL") do not match their SHA-256 digests: $why"
mkdir -p "$DEST"
for jar in "$TMP"/jars/*.jar; do
  mv -f "$jar" "$DEST/$(basename "$jar").part" && mv -f "$DEST/$(basename "$jar").part" "$DEST/$(basename "$jar")"
done
why=$(verify "$DEST") || fail "after copying into $DEST: $why"
echo "activemq6: ActiveMQ 6.1.7 jars installed in $DEST (verified)"
