package localcluster

import (
	"os"
	"path/filepath"
)

// The API server writes an audit log (audit/audit.log, JSON lines) so that the invariant checker
// (test/invariants) can tell who did what: which pods nodemaint-controller evicted, deleted or
// asked to move, and when each node was cordoned, to the microsecond and in the API server's
// own order. The policy is kept narrow so that it costs the benchmarks nothing measurable: only
// the ResponseComplete stage, only write verbs, and only
//   - nodes (not nodes/status: the kubelets' heartbeats), with the request body, to know when a
//     write set or cleared spec.unschedulable;
//   - evictionrequests (KEP-4563), with the body, for the requester and the target pod;
//   - pods/status by ServiceAccounts, with the body, for the EvacuationRequest condition (kwok,
//     which writes the pods' status, is no ServiceAccount);
//   - pods/eviction and pod deletions by the ServiceAccounts of nodemaint-system, with the body
//     for the UID precondition that names the very pod acted on (a StatefulSet's pod recreated
//     under the same name is another pod); the ReplicaSet controller's deletions are not logged;
//   - Cluster API Machines (not their status), with the body, for the releases of nodemaint's
//     pre-drain hook (the field managers do not say who removed an annotation).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
omitManagedFields: true
rules:
- level: Request
  verbs: ["create", "update", "patch"]
  resources:
  - group: ""
    resources: ["nodes"]
  - group: "lifecycle.k8s.io"
    resources: ["evictionrequests"]
  - group: "cluster.x-k8s.io"
    resources: ["machines"]
- level: Request
  verbs: ["update", "patch"]
  userGroups: ["system:serviceaccounts"]
  resources:
  - group: ""
    resources: ["pods/status"]
- level: Request
  verbs: ["create", "delete"]
  userGroups: ["system:serviceaccounts:nodemaint-system"]
  resources:
  - group: ""
    resources: ["pods", "pods/eviction"]
- level: None
`

// auditFlags are kube-apiserver's audit flags; the policy file is written by writeAuditPolicy.
// The log rotates at 200 MB and keeps one old file, so a long benchmark cannot fill the disk.
func (c *Cluster) auditFlags() []string {
	return []string{
		"--audit-policy-file=" + filepath.Join(c.dir, "audit", "policy.yaml"),
		"--audit-log-path=" + filepath.Join(c.dir, "audit", "audit.log"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=200",
		"--audit-log-maxbackup=1",
	}
}

func (c *Cluster) writeAuditPolicy() error {
	dir := filepath.Join(c.dir, "audit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(auditPolicy), 0o644)
}

// AuditLog returns the path of the API server's audit log, "" for a cluster started before the
// local cluster wrote one (a reused cluster keeps running without it).
func (c *Cluster) AuditLog() string {
	if !c.audit {
		return ""
	}
	return filepath.Join(c.dir, "audit", "audit.log")
}
