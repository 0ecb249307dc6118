package framework

import "github.com/nodemaint/nodemaint/test/invariants"

// CheckerOptions returns opts with the package cluster's audit log and nodemaint-controller's
// user (its ServiceAccount, as NewController runs it), so that an invariant checker started with
// them also judges every ask, eviction and deletion of the controller's (test/invariants,
// acts.go). Every test that starts a checker passes its options through it. A cluster that
// writes no audit log (one started before test/localcluster wrote it) leaves AuditLog empty:
// the checker then runs only its watch-based checks.
func CheckerOptions(opts invariants.Options) invariants.Options {
	if opts.AuditLog == "" {
		opts.AuditLog = cluster.AuditLog()
	}
	if opts.ControllerUser == "" {
		opts.ControllerUser = "system:serviceaccount:" + ControllerNamespace + ":" + ControllerServiceAccount
	}
	return opts
}
