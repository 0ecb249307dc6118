#!/usr/bin/env bash
# Lints and renders the Helm chart with its defaults and with each non-default toggle
# (`make verify-chart`, part of `make verify`): helm lint --strict checks values.yaml and every
# --set below against values.schema.json; helm template must render. A value the schema does not
# know, or of the wrong type, must be refused. test/e2e/install checks what is rendered and has the
# API server validate it.
set -euo pipefail
cd "$(dirname "$0")/.."

helm=${HELM:-$(hack/tools.sh helm)}
chart=charts/nodemaint
ns=nodemaint-system

toggles=(
  ""
  "--set serviceMonitor.enabled=true --set serviceMonitor.labels.release=prometheus --set serviceMonitor.scrapeTimeout=10s --set metrics.certManager.enabled=true"
  "--set serviceMonitor.enabled=true --set metrics.certSecret=nodemaint-metrics-tls --set serviceMonitor.scrapeClass=kubernetes-token"
  "--set serviceMonitor.enabled=true --set metrics.certManager.enabled=true --set metrics.certManager.issuerRef.name=ca --set metrics.certManager.issuerRef.kind=ClusterIssuer"
  "--set serviceMonitor.enabled=true --set metrics.certSecret=tls --set serviceMonitor.tlsConfig.ca.configMap.name=ca --set serviceMonitor.tlsConfig.ca.configMap.key=ca.crt"
  "--set serviceMonitor.enabled=true --set serviceMonitor.tlsConfig.insecureSkipVerify=true --set serviceMonitor.tokenSecret=true"
  "--set serviceMonitor.enabled=true --set metrics.secure=false"
  "--set metricsReaderServiceAccounts[0].name=prometheus-k8s --set metricsReaderServiceAccounts[0].namespace=monitoring"
  "--set admissionPolicies.nodeScope.enabled=true --set admissionPolicies.nodeScope.labelKey=topology.example.com/rack"
  "--set admissionPolicies.drainTimeoutDelete.enabled=false"
  "--set rbac.create=false --set serviceAccount.create=false --set serviceAccount.name=nodemaint"
  "--set replicas=1 --set leaderElection.enabled=false"
  "--set podDisruptionBudget.enabled=false --set metrics.service.enabled=false"
  "--set podDisruptionBudget.maxUnavailable=50%"
  "--set featureGates.NodeMaintenanceDeployment=false --set extraArgs={--max-concurrent-evictions=50}"
  "--set extraEnv[0].name=GOGC --set-string extraEnv[0].value=100"
  "--set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef --set fullnameOverride=maint"
  "--set prometheusRule.enabled=true --set prometheusRule.labels.release=prometheus --set prometheusRule.for.NodemaintDrainBlocked=1h"
  "--set grafanaDashboard.enabled=true --set grafanaDashboard.namespace=monitoring"
  "--set admissionPolicies.evictionResponder.enabled=true"
  "--set admissionPolicies.evictionResponder.enabled=false"
  "--set priorityClassName=system-cluster-critical"
  "--set priorityClass.create=true"
  "--set podAntiAffinity=required --set nodeSelector=null"
  "--set podAntiAffinity=none"
  "--set priorityClass.value=2000"
  "--set crds.install=false"
  "--set clusterAPI.enabled=true"
  "--set clusterAPI.enabled=true --set clusterAPI.self=capi/mgmt --set clusterAPI.kubeconfigNamespaces={team-a,team-b}"
)
for t in "${toggles[@]}"; do
  # shellcheck disable=SC2086 # the toggles are words
  if ! out=$("$helm" lint --strict "$chart" --namespace "$ns" $t 2>&1); then
    echo "helm lint ${t:-(defaults)}:"; echo "$out"; exit 1
  fi
  # shellcheck disable=SC2086
  if ! out=$("$helm" template nodemaint "$chart" --namespace "$ns" $t 2>&1 >/dev/null); then
    echo "helm template ${t:-(defaults)}:"; echo "$out"; exit 1
  fi
done

refused=(
  "--set metrics.sekure=true"
  "--set replicas=two"
  "--set metrics.port=0"
  "--set featureGates.NoSuchGate=true"
  "--set image.pullPolicy=Sometimes"
  "--set metricsReaderServiceAccounts[0].name=prometheus"
  "--set admissionPolicies.evictionResponder.enabled=sometimes"
  "--set prometheusRule.for.NodemaintDrainBlocked=soon"
  "--set clusterAPI.enabled=maybe"
  "--set podAntiAffinity=sometimes"
  "--set serviceMonitor.enabled=true"
  "--set clusterAPI.self=mgmt"
)
for t in "${refused[@]}"; do
  # shellcheck disable=SC2086
  if "$helm" template nodemaint "$chart" --namespace "$ns" $t >/dev/null 2>&1; then
    echo "helm template $t: rendered, but values.schema.json or the chart's own checks should refuse it"; exit 1
  fi
done
echo "chart: lint and template with ${#toggles[@]} sets of values; ${#refused[@]} wrong values refused"
