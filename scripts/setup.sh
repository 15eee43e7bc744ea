#!/usr/bin/env bash
# Installs what amqstomp's demo and tests need, when it is missing:
#   - Debian's ActiveMQ Classic and Java (apt-get, as root; otherwise says what to install),
#     plus a C compiler, the Python headers and venv when the Python lacks them,
#   - valgrind, for the performance gate's instruction counts (bench/instructions.py, run by
#     bench/gate.py at the end of .ci/run): installed as root; not root, a warning only (the gate's
#     instruction metrics then FAIL, saying why),
#   - a virtual environment in .venv with amqstomp installed editable (compiled extensions built
#     in place) and its test/bench dependencies (and the otel extra's: OpenTelemetry).
# `bash scripts/setup.sh --system` does the first part only (scripts/test.sh's full pipeline
# builds its own virtual environments outside the tree).
# Run by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

PYTHON=${PYTHON:-python3}
need_apt=()
[ -f /usr/share/activemq/bin/activemq.jar ] || need_apt+=(activemq)
# xstream/jettison/xpp3 let the test broker's `transformation` headers and statistics plugin work
for jar in xstream jettison xpp3; do
  [ -f "/usr/share/java/$jar.jar" ] || need_apt+=("lib$jar-java")
done
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
# building the extensions: a C compiler, Python.h, and venv/ensurepip (Debian splits them off)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then need_apt+=(python3-venv); fi
if ! "$PYTHON" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_config_var("INCLUDEPY") or "", "Python.h")))' 2>/dev/null; then
  need_apt+=(python3-dev)
fi
# the gate's callgrind counts: needed by CI (as root), not by the demo or the tests
if ! command -v valgrind >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    need_apt+=(valgrind)
  else
    echo "setup: warning: valgrind is missing: bench/gate.py's instruction metrics will FAIL (as root: apt-get install -y valgrind)" >&2
  fi
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}"
    # another apt-get (an unattended upgrade, a second setup) may hold dpkg's lock: wait for it
    # up to 5 minutes instead of failing at once
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${need_apt[*]}" >&2
    echo "setup: run as root: apt-get install -y ${need_apt[*]}" >&2
    exit 2
  fi
fi
[ "${1:-}" = --system ] && exit 0

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.amqstomp-installed
# built modules where the build puts them (an editable install builds them in the tree; a moved
# source leaves them elsewhere, with mtimes older than the stamp)
built() { compgen -G "amqstomp/_core/_codec.*.so" >/dev/null && compgen -G "amqstomp/_core/_flow.*.so" >/dev/null \
  && compgen -G "amqstomp/_io/_handoff.*.so" >/dev/null; }
if [ ! -f "$stamp" ] || ! built || [ -n "$(find setup.py pyproject.toml amqstomp -newer "$stamp" \( -name '*.pyx' -o -name '*.pxi' -o -name '*.pxd' -o -name '_flow_py.py' -o -name '_handoff_py.py' -o -name 'setup.py' -o -name 'pyproject.toml' \) -print -quit)" ]; then
  started=$SECONDS
  if [ -f "$stamp" ]; then
    echo "setup: a Cython source changed (or a compiled module is missing): recompiling amqstomp's extensions (about a minute)"
  else
    # the .pxi files named by _codec.pyx's own include lines (all in git: none is generated)
    pxis=$(sed -n 's/^include "\(.*\)"$/\1/p' amqstomp/_core/_codec.pyx | paste -sd, - | sed 's/,/, /g')
    echo "setup: first run: installing amqstomp editable into .venv with its test/bench dependencies, and"
    echo "setup: compiling its three C extensions with Cython + the C compiler: amqstomp._core._codec (_codec.pyx with"
    echo "setup: $pxis: the frame codec), amqstomp._core._flow (_flow_py.py typed by"
    echo "setup: _flow.pxd: prefetch windows, ack batching) and amqstomp._io._handoff (_handoff_py.py typed by _handoff.pxd:"
    echo "setup: the reader/dispatcher hand-off). About 1 minute on 2 CPUs (measured 42 to 57 s; longer on a loaded machine);"
    echo "setup: later runs skip this unless a .pyx/.pxi/.pxd, _flow_py.py or _handoff_py.py changes."
  fi
  # -qq: only errors (with the build's output when compiling fails)
  .venv/bin/python -m pip install -qq --upgrade pip
  .venv/bin/python -m pip install -qq -e '.[test,bench,otel]'
  touch "$stamp"
  echo "setup: done in $((SECONDS - started)) s ($(.venv/bin/python -c 'import amqstomp.codec as c, amqstomp.flow as f; import amqstomp._io.handoff as h; print("codec", c.IMPLEMENTATION + ",", "flow", f.IMPLEMENTATION + ",", "handoff", h.IMPLEMENTATION)'))"
fi
