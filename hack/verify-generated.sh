#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy, CRDs, RBAC, the chart's copies) differ from what the markers give.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s generate >/dev/null
if ! git diff --quiet --exit-code -- api config charts test/e2e/testdata; then
  git --no-pager diff --stat -- api config charts test/e2e/testdata
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  exit 1
fi
if [ -n "$(git ls-files --others --exclude-standard -- api config charts test/e2e/testdata)" ]; then
  git ls-files --others --exclude-standard -- api config charts test/e2e/testdata
  echo "generated files are not committed: run 'make generate' and commit the result" >&2
  exit 1
fi
