#!/usr/bin/env bash
# README command (a): producer -> local ActiveMQ -> consumer through amqstomp.
# Extra arguments go to `amqstomp demo` (e.g. --messages 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m amqstomp demo "$@"
