#!/usr/bin/env bash
# Builds (once) the developer tools nodemaint needs beyond the control plane, from their Go modules:
# helm and staticcheck. Cached outside the repository, keyed by version, like hack/control-plane.sh.
#
# Usage: hack/tools.sh helm          # builds if needed, prints the path of the helm binary
#        hack/tools.sh staticcheck   # the same for staticcheck (honnef.co/go/tools)
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}

# build NAME VERSION PACKAGE [go install flags...]: go install PACKAGE@VERSION into the cache once.
build() {
  local name=$1 version=$2 pkg=$3
  shift 3
  local bin="$cache/$name-$version/bin"
  if [ ! -x "$bin/$name" ]; then
    mkdir -p "$cache"
    exec 9>"$cache/.tools.lock"
    flock 9
    if [ ! -x "$bin/$name" ]; then
      echo "building $name $version from source (one time, a few minutes) into $bin" >&2
      mkdir -p "$bin"
      GOBIN="$bin" GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 \
        go install -trimpath "$@" "$pkg@$version" >&2
    fi
  fi
  echo "$bin/$name"
}

case "${1:-}" in
helm)
  build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
    -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
  ;;
staticcheck)
  build staticcheck "$STATICCHECK_VERSION" honnef.co/go/tools/cmd/staticcheck
  ;;
*)
  echo "usage: $0 helm|staticcheck" >&2
  exit 2
  ;;
esac
