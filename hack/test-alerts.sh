#!/usr/bin/env bash
# Tests nodemaint's alerts with `promtool test rules` (Debian: apt-get install prometheus): the
# rules are the spec of config/default/prometheus/rules.yaml (the one source; the chart copies
# it), the tests test/alerts/*_test.yaml. Run by `make test-alerts`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
  echo "promtool not found: apt-get install prometheus" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The PrometheusRule's spec, one level up: a plain rule file. spec is its last top-level key.
awk 'found { sub(/^  /, ""); print } /^spec:/ { found = 1 }' config/default/prometheus/rules.yaml >"$dir/rules.yaml"
promtool check rules "$dir/rules.yaml"
cp test/alerts/*_test.yaml "$dir/"
cd "$dir"
promtool test rules ./*_test.yaml
