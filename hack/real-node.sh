#!/usr/bin/env bash
# Builds what one real node of the local cluster runs (REAL_NODES=1 make cluster-up): the kubelet
# and kube-proxy from the k8s.io/kubernetes module of the control plane's version (hack/control-plane.sh),
# containerd with its runc shim and ctr, runc, and the CNI plugins bridge, host-local and
# loopback, all from their Go modules: nothing is fetched but Go modules and Debian's
# libseccomp-dev. runc is the one built with cgo (its nsenter is C; gcc is on the machine), with
# seccomp (libseccomp-dev, installed here as root with apt-get). The binaries are cached outside
# the repository, keyed by version, so the cold build (5-10 min on 2 cores; the kubelet reuses
# the control plane's packages from Go's build cache) happens once per machine; a binary missing
# from the cache (one added here since) is built alone. kube-proxy runs nft (Debian's nftables,
# make test-deps).
#
# Usage: hack/real-node.sh        # builds if needed, prints the bin directory
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.1}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.10.0}

cache=${NODEMAINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodemaint}
key="node-k8s-${K8S_VERSION}_containerd-${CONTAINERD_VERSION}_runc-${RUNC_VERSION}_cni-${CNI_PLUGINS_VERSION}"
bin="$cache/$key/bin"
want=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback)

complete() {
  for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done
}

if complete; then
  echo "$bin"
  exit 0
fi

# Only one build at a time per machine, shared with hack/control-plane.sh.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if complete; then
  echo "$bin"
  exit 0
fi

echo "building the real node (kubelet and kube-proxy ${K8S_VERSION}, containerd ${CONTAINERD_VERSION}, runc ${RUNC_VERSION}, CNI plugins ${CNI_PLUGINS_VERSION}) from source (one time) into $bin" >&2
mkdir -p "$bin"
src="$cache/$key/src"
rm -rf "$src"
mkdir -p "$src/k8s"
minor="v0.${K8S_VERSION#v1.}"
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

# missing NAME...: whether one of the binaries is not built yet.
missing() {
  for b in "$@"; do [ -x "$bin/$b" ] || return 0; done
  return 1
}

# kubelet and kube-proxy: the same throwaway module as hack/control-plane.sh's, so that Go's
# build cache shares the packages they build.
missing kubelet kube-proxy && (
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
    -o "$bin/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
) >&2

# containerd, its runc shim and ctr, static, without the btrfs snapshotter (cgo).
missing containerd ctr && GOBIN="$bin" go install -trimpath -tags "no_btrfs urfave_cli_no_docs" \
  -ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" \
  "github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD_VERSION}" \
  "github.com/containerd/containerd/v2/cmd/ctr@${CONTAINERD_VERSION}" >&2
missing containerd-shim-runc-v2 && GOBIN="$bin" go install -trimpath -tags "no_grpc urfave_cli_no_docs" \
  -ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}" >&2

# runc: cgo for libcontainer's nsenter, and seccomp (containerd gives the pod sandboxes the
# runtime/default profile) with Debian's libseccomp-dev; no libpathrs (Rust).
if missing runc && ! pkg-config --exists libseccomp 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "Installing libseccomp-dev pkg-config (apt-get), for runc's seccomp" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libseccomp-dev pkg-config >&2
  else
    echo "runc needs libseccomp-dev and pkg-config: run 'sudo apt-get install libseccomp-dev pkg-config'" >&2
    exit 1
  fi
fi
missing runc && CGO_ENABLED=1 GOBIN="$bin" go install -trimpath -tags "seccomp urfave_cli_no_docs" \
  -ldflags="-s -w -X main.version=${RUNC_VERSION#v}" \
  "github.com/opencontainers/runc@${RUNC_VERSION}" >&2

# The CNI plugins of the node's network: a bridge, host-local addresses, the loopback.
missing bridge loopback host-local && GOBIN="$bin" go install -trimpath -ldflags="-s -w" \
  "github.com/containernetworking/plugins/plugins/main/bridge@${CNI_PLUGINS_VERSION}" \
  "github.com/containernetworking/plugins/plugins/main/loopback@${CNI_PLUGINS_VERSION}" \
  "github.com/containernetworking/plugins/plugins/ipam/host-local@${CNI_PLUGINS_VERSION}" >&2

rm -rf "$src"
complete
echo "$bin"
