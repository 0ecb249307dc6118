#!/usr/bin/env bash
# Builds (once) the kube-apiserver of the oldest Kubernetes nodemaint supports (MIN_KUBE_VERSION,
# the README's "Kubernetes" line) from its Go module, as hack/control-plane.sh builds the current
# one, and prints a directory for KUBEBUILDER_ASSETS: that kube-apiserver beside the etcd of
# hack/control-plane.sh. Cached outside the repository, keyed by version. `make verify-min-kube`.
#
# Usage: hack/min-kube.sh     # builds if needed, prints the bin directory
set -euo pipefail
cd "$(dirname "$0")/.."

MIN_KUBE_VERSION=${MIN_KUBE_VERSION:-v1.32.13}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}
bin="$cache/kube-apiserver-${MIN_KUBE_VERSION}/bin"
control_plane=$(hack/control-plane.sh)

if [ ! -x "$bin/kube-apiserver" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.min-kube.lock"
  flock 9
  if [ ! -x "$bin/kube-apiserver" ]; then
    echo "building kube-apiserver ${MIN_KUBE_VERSION} from source (one time, several minutes) into $bin" >&2
    src="$cache/kube-apiserver-${MIN_KUBE_VERSION}/src"
    rm -rf "$src"
    mkdir -p "$src" "$bin"
    minor="v0.${MIN_KUBE_VERSION#v1.}"
    k8s_minor=$(echo "$MIN_KUBE_VERSION" | cut -d. -f2)
    (
      cd "$src"
      export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
      go mod init nodemaint.dev/minkube >/dev/null 2>&1
      go mod edit -require="k8s.io/kubernetes@${MIN_KUBE_VERSION}"
      gomod=$(go mod download -json "k8s.io/kubernetes@${MIN_KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
      for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
        go mod edit -replace="$m=$m@$minor"
      done
      go build -trimpath -ldflags="-s -w \
        -X k8s.io/component-base/version.gitVersion=${MIN_KUBE_VERSION} \
        -X k8s.io/component-base/version.gitMajor=1 \
        -X k8s.io/component-base/version.gitMinor=${k8s_minor}" \
        -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver
    ) >&2
    rm -rf "$src"
  fi
fi
ln -sf "$control_plane/etcd" "$bin/etcd"
echo "$bin"
