#!/usr/bin/env bash
# Builds (once) the developer tools nodemaint needs beyond the control plane, from their Go modules:
# today only helm. Cached outside the repository, keyed by version, like hack/control-plane.sh.
#
# Usage: hack/tools.sh helm     # builds if needed, prints the path of the helm binary
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}

case "${1:-}" in
helm)
  bin="$cache/helm-${HELM_VERSION}/bin"
  if [ ! -x "$bin/helm" ]; then
    mkdir -p "$cache"
    exec 9>"$cache/.tools.lock"
    flock 9
    if [ ! -x "$bin/helm" ]; then
      echo "building helm ${HELM_VERSION} from source (one time, ~2 min) into $bin" >&2
      mkdir -p "$bin"
      GOBIN="$bin" GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 \
        go install -trimpath -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
        "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
    fi
  fi
  echo "$bin/helm"
  ;;
*)
  echo "usage: $0 helm" >&2
  exit 2
  ;;
esac
