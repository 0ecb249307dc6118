#!/usr/bin/env bash
# Installs what `make test` needs beside Go and make (`make test-deps`, run first by `make test`):
# tmux (the plugin's terminal test runs it) and promtool (the alerts' tests; Debian's package
# prometheus, whose server the metrics e2e test also scrapes the controller with); as root, for
# the real node (make test runs its tests as root only), ip (iproute2: its bridge), unshare
# and mount (util-linux, mount: the kubelet's mount namespace) and nft (nftables: its
# kube-proxy). As root with apt-get it installs them; otherwise it names the one command that
# does, and fails.
set -euo pipefail

missing=()
command -v tmux >/dev/null || missing+=(tmux)
command -v promtool >/dev/null || missing+=(prometheus)
if [ "$(id -u)" -eq 0 ]; then
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  command -v mount >/dev/null || missing+=(mount)
  command -v nft >/dev/null || PATH=$PATH:/usr/sbin command -v nft >/dev/null || missing+=(nftables)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "Installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "make test needs ${missing[*]}: run 'sudo make test-deps' (it runs apt-get install ${missing[*]}), or install them with your package manager" >&2
exit 1
