#!/usr/bin/env bash
# Builds the Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl) and kwok from their Go modules, with nothing fetched but Go modules. The binaries are cached
# outside the repository, keyed by version, so the cold build (~7 min) happens once per machine.
#
# Usage: hack/control-plane.sh        # builds if needed, prints the bin directory
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}
key="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
bin="$cache/$key/bin"
stages="$cache/$key/stages"
want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

complete() {
  for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done
  [ -f "$stages/.done" ]
}

if complete; then
  echo "$bin"
  exit 0
fi

# Only one build at a time per machine (make test and make cluster-up may race).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if complete; then
  echo "$bin"
  exit 0
fi

echo "building Kubernetes control plane ${K8S_VERSION} from source (one time, ~7 min) into $bin" >&2
mkdir -p "$bin" "$stages"
src="$cache/$key/src"
rm -rf "$src"
mkdir -p "$src/k8s" "$src/etcd"
minor="v0.${K8S_VERSION#v1.}"
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

# kube-*: a throwaway module requiring k8s.io/kubernetes with every staging module it lists at
# v0.0.0 replaced by its published v0.Y.Z.
(
  cd "$src/k8s"
  go mod init nodemaint.dev/controlplane >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
  gomod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
    go mod edit -replace="$m=$m@$minor"
  done
  go build -trimpath -ldflags="-s -w \
    -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} \
    -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=${k8s_minor} \
    -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}" \
    -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
) >&2

# etcd: a five-line main around etcdmain.
(
  cd "$src/etcd"
  go mod init nodemaint.dev/etcd >/dev/null 2>&1
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null 2>&1
  go build -trimpath -ldflags="-s -w" -o "$bin/etcd" .
) >&2

# kwok and the Stage configs its module ships.
GOBIN="$bin" go install "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2
kwokdir=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
cp -r "$kwokdir/kustomize/stage/." "$stages/"
chmod -R u+w "$stages"
touch "$stages/.done"
rm -rf "$src"
echo "$bin"
