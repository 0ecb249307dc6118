#!/usr/bin/env bash
# Copies the generated install files into the Helm chart, so the chart and config/ cannot drift:
# the CRDs (config/crd/bases) into charts/nodemaint/files/crds/, which templates/crds.yaml renders
# (installed and upgraded with the release, kept when it is uninstalled), the ClusterRoles and leader-election
# Role (config/rbac: the controller's, the metrics endpoint's and the metrics reader's) into
# charts/nodemaint/files/, the admission policies (config/admission) into
# charts/nodemaint/files/admission/, whose rules the chart's templates read, and the alerts and
# dashboard (config/default/prometheus) into charts/nodemaint/files/prometheus/.
# Run by `make generate`; test/e2e/install fails when the copies differ.
set -euo pipefail
cd "$(dirname "$0")/.."

chart=charts/nodemaint
rm -rf "$chart/files/crds"
mkdir -p "$chart/files/crds"
cp config/crd/bases/*.yaml "$chart/files/crds/"
cp config/rbac/role.yaml config/rbac/leader_election_role.yaml config/rbac/metrics_auth_role.yaml config/rbac/metrics_reader_role.yaml "$chart/files/"
# The users' roles (config/rbac/*_viewer_role.yaml, *_editor_role.yaml), which rbac.create renders.
rm -rf "$chart/files/user_roles"
mkdir -p "$chart/files/user_roles"
cp config/rbac/*_viewer_role.yaml config/rbac/*_editor_role.yaml "$chart/files/user_roles/"
# The opt-in ClusterRole that lets the controller delete pods (config/pod-deletion), which
# podDeletion.enabled renders.
cp config/pod-deletion/role.yaml "$chart/files/pod_deletion_role.yaml"
# The Cluster API controller's ClusterRoles (config/cluster-api), which clusterAPI.enabled renders.
cp config/cluster-api/role.yaml "$chart/files/cluster_api_role.yaml"
cp config/cluster-api/kubeconfig_role.yaml "$chart/files/cluster_api_kubeconfig_role.yaml"
# The admission policies, whose specs the chart's templates read.
rm -rf "$chart/files/admission"
mkdir -p "$chart/files/admission"
cp config/admission/drain_timeout_delete_policy.yaml config/admission/node-scope/node_scope_policy.yaml \
  config/admission/eviction-responder/eviction_responder_policy.yaml \
  config/admission/controller-writes/controller_writes_policy.yaml "$chart/files/admission/"
# The alerts (config/default/prometheus/rules.yaml, a PrometheusRule) and the Grafana dashboard
# (config/default/prometheus/dashboard.json), which the chart's prometheusrule.yaml and
# dashboard.yaml render.
rm -rf "$chart/files/prometheus"
mkdir -p "$chart/files/prometheus"
cp config/default/prometheus/rules.yaml config/default/prometheus/dashboard.json "$chart/files/prometheus/"
