#!/usr/bin/env bash
# Builds (once) the kube-apiserver and kube-controller-manager of the oldest Kubernetes nodemaint
# supports (MIN_KUBE_VERSION, the README's "Kubernetes" line) from its Go module, as
# hack/control-plane.sh builds the current ones, and prints a directory for KUBEBUILDER_ASSETS:
# those beside the etcd of hack/control-plane.sh. kube-controller-manager type-checks admission
# policies (the policies' status). Cached outside the repository, keyed by version.
# `make verify-min-kube`.
#
# Usage: hack/min-kube.sh     # builds if needed, prints the bin directory
set -euo pipefail
cd "$(dirname "$0")/.."

MIN_KUBE_VERSION=${MIN_KUBE_VERSION:-v1.32.13}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}
bin="$cache/kube-apiserver-${MIN_KUBE_VERSION}/bin"
control_plane=$(hack/control-plane.sh)

built() { [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ]; }
if ! built; then
  mkdir -p "$cache"
  exec 9>"$cache/.min-kube.lock"
  flock 9
  if ! built; then
    echo "building kube-apiserver and kube-controller-manager ${MIN_KUBE_VERSION} from source (one time, several minutes) into $bin" >&2
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
      # Each staging module at its published v0.Y.Z. A module proxy may leave out a version (this
      # machine's serves no k8s.io/endpointslice v0.32.13, which kube-controller-manager imports):
      # then the nearest earlier patch of the same minor, said on stderr.
      for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
        v=$minor
        patch=${minor##*.}
        while ! go mod download "$m@$v" 2>/dev/null && [ "$patch" -gt 0 ]; do
          patch=$((patch - 1))
          v=${minor%.*}.$patch
        done
        [ "$v" = "$minor" ] || echo "min-kube: $m@$minor is not served; using $m@$v" >&2
        go mod edit -replace="$m=$m@$v"
      done
      go build -trimpath -ldflags="-s -w \
        -X k8s.io/component-base/version.gitVersion=${MIN_KUBE_VERSION} \
        -X k8s.io/component-base/version.gitMajor=1 \
        -X k8s.io/component-base/version.gitMinor=${k8s_minor}" \
        -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    ) >&2
    rm -rf "$src"
  fi
fi
ln -sf "$control_plane/etcd" "$bin/etcd"
echo "$bin"
