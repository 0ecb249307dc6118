#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy, CRDs, RBAC) differ from what the markers give.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s generate >/dev/null
if ! git diff --quiet --exit-code -- api config; then
  git --no-pager diff --stat -- api config
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  exit 1
fi
if [ -n "$(git ls-files --others --exclude-standard -- api config)" ]; then
  git ls-files --others --exclude-standard -- api config
  echo "generated files are not committed: run 'make generate' and commit the result" >&2
  exit 1
fi
