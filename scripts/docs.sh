#!/usr/bin/env bash
# Build the documentation site into site/ (strict: a broken link, a page missing from the
# navigation or a bad reference fails the build), or serve it while you edit it.
#   bash scripts/docs.sh            # build site/, for a web server (not for file://: its links
#                                   # are folders and its search needs http)
#   bash scripts/docs.sh serve      # read it on http://127.0.0.1:8000, rebuilt on every change
# Sets up .venv first if needed (scripts/setup.sh installs MkDocs with the 'docs' extra).
# Nothing is fetched: the theme's fonts are the system's and no plugin downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-build}" = serve ]; then
  shift
  exec .venv/bin/python -m mkdocs serve --strict "$@"
fi
[ "${1:-}" = build ] && shift
exec .venv/bin/python -m mkdocs build --strict --site-dir site "$@"
