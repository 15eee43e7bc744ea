#!/usr/bin/env bash
# Installs what amqstomp's demo and tests need, when it is missing:
#   - Debian's ActiveMQ Classic (apt-get, as root; otherwise says what to install),
#   - a virtual environment in .venv with amqstomp (compiled extension built in place)
#     and its test/bench dependencies.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need_apt=()
[ -f /usr/share/activemq/bin/activemq.jar ] || need_apt+=(activemq)
# xstream/jettison/xpp3 let the test broker's `transformation` headers and statistics plugin work
for jar in xstream jettison xpp3; do
  [ -f "/usr/share/java/$jar.jar" ] || need_apt+=("lib$jar-java")
done
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${need_apt[*]}" >&2
    echo "setup: run as root: apt-get install -y ${need_apt[*]}" >&2
    exit 2
  fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.amqstomp-installed
if [ ! -f "$stamp" ] || [ -n "$(find setup.py pyproject.toml amqstomp -newer "$stamp" \( -name '*.pyx' -o -name '*.pxd' -o -name 'setup.py' -o -name 'pyproject.toml' \) -print -quit)" ]; then
  echo "setup: installing amqstomp (compiling the Cython extension) into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test,bench]'
  touch "$stamp"
fi
