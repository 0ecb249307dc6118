#!/usr/bin/env bash
# make demo: the local cluster, the controller, a sample workload on one node, and a drain of that
# node with kubectl maintenance, shown live. The cluster and the controller keep running.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=_output/cluster
node=kwok-node-0
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

say "Building nodemaint"
make -s build
bin=$(hack/control-plane.sh)
kubectl() { "$bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }

say "Starting the local cluster (real control plane, kwok kubelets)"
go run ./hack/localcluster up --dir "$dir" --nodes 4 --bin-dir "$bin"

say "Installing the CRDs and RBAC"
kubectl apply --server-side -f config/manager/namespace.yaml -f config/crd/bases >/dev/null
kubectl apply --server-side -k config/rbac >/dev/null
kubectl wait --for condition=Established crd/nodemaintenances.nodemaint.dev >/dev/null

say "Starting nodemaint-controller (log: $dir/logs/nodemaint-controller.log)"
pidfile=$dir/run/nodemaint-controller.pid
if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; sleep 1; fi
mkdir -p "$dir/run" "$dir/logs"
setsid bin/nodemaint-controller --kubeconfig "$dir/kubeconfig" --leader-elect=false \
  --metrics-bind-address=127.0.0.1:28080 --health-probe-bind-address=127.0.0.1:28081 \
  >"$dir/logs/nodemaint-controller.log" 2>&1 </dev/null &
echo $! >"$pidfile"
# Ready once /readyz answers 200 (bash's /dev/tcp: no curl needed).
readyz() {
  exec 3<>/dev/tcp/127.0.0.1/28081 || return 1
  printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  local status; read -r _ status _ <&3; exec 3<&-
  [ "$status" = 200 ]
}
for _ in $(seq 50); do readyz 2>/dev/null && break; sleep 0.2; done

say "Deploying the sample workload on $node (config/samples/demo.yaml)"
others=$(kubectl get nodes -o name | grep -v "/$node\$")
kubectl delete namespace demo --ignore-not-found --wait >/dev/null
kubectl cordon $others >/dev/null
kubectl apply -f config/samples/demo.yaml >/dev/null
kubectl -n demo rollout status deployment/checkout --timeout=2m >/dev/null
kubectl -n demo rollout status deployment/web --timeout=2m >/dev/null
kubectl -n demo rollout status statefulset/db --timeout=2m >/dev/null
kubectl uncordon $others >/dev/null
kubectl -n demo rollout status daemonset/log-agent --timeout=2m >/dev/null
kubectl -n demo get pods -o wide

# The single-replica app's ready replicas, from a watch, for the whole drain.
ready_log=$dir/logs/checkout-ready.log
kubectl -n demo get deployment checkout -w -o 'jsonpath={.status.readyReplicas}{"\n"}' >"$ready_log" 2>/dev/null &
watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT

say "kubectl maintenance drain $node"
bin/kubectl-maintenance --kubeconfig "$dir/kubeconfig" drain "$node" --reason "demo: kernel upgrade" \
  --response-timeout 10s --timeout 5m
kill $watcher 2>/dev/null || true
min=$(grep -v '^$' "$ready_log" | sort -n | head -1)
say "checkout (1 replica, PDB minAvailable: 1) had at least ${min:-?} ready pod at every moment of the drain"
kubectl -n demo get pods -o wide

say "kubectl maintenance complete $node"
bin/kubectl-maintenance --kubeconfig "$dir/kubeconfig" complete "$node"
kubectl get nodes

cat <<EOT

The cluster and the controller keep running. Poke at them:
  export KUBECONFIG=$PWD/$dir/kubeconfig
  kubectl get nodemaintenances
  bin/kubectl-maintenance status
  bin/kubectl-maintenance drain kwok-node-1 --response-timeout 10s
Stop everything with: make cluster-down
EOT
