#!/usr/bin/env bash
# README command (b): the test suite, against real ActiveMQ brokers the tests start themselves.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -p no:cacheprovider "$@"
