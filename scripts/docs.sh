#!/usr/bin/env bash
# The documentation site (mkdocs.yml, pages in docs/, API reference from the docstrings).
#
#   bash scripts/docs.sh            check that public classes carry no undocumented public names and
#                                   that the pages list no name where it is not (scripts/api_internals.py
#                                   --check: any fails, bar the deferred ones it lists with their reason;
#                                   mkdocstrings skips those silently), then `mkdocs build --strict`
#   bash scripts/docs.sh serve      the same site, live, on http://127.0.0.1:8000
#   bash scripts/docs.sh internals  list those names (scripts/api_internals.py), deferred ones too
#
# Uses (and creates when missing) the virtual environment .venv-docs (AMQSTOMP_DOCS_VENV to
# choose another), with the `docs` extra of pyproject.toml and amqstomp itself installed as the
# pure-Python build (no compiler needed: the reference is read from the sources by griffe, the
# compiled modules have pure twins with the same names). Reinstalls when pyproject.toml,
# setup.py or a file under amqstomp/ is newer than the last install. Called by .ci/run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export NO_MKDOCS_2_WARNING=1  # Material's banner about MkDocs 2.0 (not a build warning)
PYTHON=${PYTHON:-python3}
VENV=${AMQSTOMP_DOCS_VENV:-.venv-docs}

mode=build
case "${1:-}" in
  "") ;;
  serve|internals) mode=$1 ;;
  -h|--help) sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "docs.sh: unknown argument '$1' (build, serve or internals)" >&2; exit 2 ;;
esac

if [ ! -x "$VENV/bin/python" ]; then
  echo "docs: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp=$VENV/.amqstomp-docs-installed
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml setup.py amqstomp -newer "$stamp" -type f -print -quit)" ]; then
  echo "docs: installing the docs extra and amqstomp (pure-Python build) into $VENV"
  AMQSTOMP_NO_EXTENSIONS=1 "$VENV/bin/python" -m pip install -qq --upgrade '.[docs]'
  touch "$stamp"
fi

case "$mode" in
  build)
    echo "docs: scripts/api_internals.py --check (no internals in help() of the API classes, no name listed where it is not)"
    if ! out=$("$VENV/bin/python" scripts/api_internals.py --check 2>&1); then
      printf '%s\n' "$out" >&2
      exit 1
    fi
    echo "docs: $(printf '%s\n' "$out" | tail -n 1)"
    echo "docs: mkdocs build --strict (warnings are errors) -> site/"
    "$VENV/bin/python" -m mkdocs build --strict --site-dir site
    echo "docs: built site/index.html ($(find site -name '*.html' | wc -l) pages)"
    ;;
  serve)
    exec "$VENV/bin/python" -m mkdocs serve --strict --dev-addr 127.0.0.1:8000
    ;;
  internals)
    exec "$VENV/bin/python" scripts/api_internals.py
    ;;
esac
