package phase

import (
	"errors"

	"github.com/spf13/cobra"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"
)

// kubectlDrainFlags are the flags of kubectl drain that runbooks type, on `drain`. With nodemaint
// each means what nodemaint does (--dry-run), is accepted where nodemaint already behaves so
// (--ignore-daemonsets, --delete-emptydir-data), or is refused with one line that names what
// nodemaint offers instead. In the classic fallback, on a cluster without nodemaint, they mean
// what they mean to kubectl drain.
type kubectlDrainFlags struct {
	cmd                *cobra.Command
	ignoreDaemonSets   bool
	deleteEmptyDirData bool
	deleteLocalData    bool
	force              bool
	disableEviction    bool
	gracePeriod        int
	podSelector        string
	skipWaitForDelete  int
}

func (f *kubectlDrainFlags) addFlags(cmd *cobra.Command) {
	f.cmd = cmd
	fs := cmd.Flags()
	fs.BoolVar(&f.ignoreDaemonSets, "ignore-daemonsets", false, "kubectl drain's: nodemaint never drains DaemonSet pods, so it changes nothing here")
	fs.BoolVar(&f.deleteEmptyDirData, "delete-emptydir-data", false, "kubectl drain's: nodemaint moves pods with emptyDir volumes (preflight lists the data lost), so it changes nothing here")
	fs.BoolVar(&f.deleteLocalData, "delete-local-data", false, "kubectl drain's old name of --delete-emptydir-data")
	_ = fs.MarkDeprecated("delete-local-data", "use --delete-emptydir-data")
	fs.BoolVar(&f.force, "force", false, "kubectl drain's; refused: nodemaint evicts pods no controller manages through their budgets, after --response-timeout")
	fs.BoolVar(&f.disableEviction, "disable-eviction", false, "kubectl drain's; refused: nodemaint never deletes past a budget unless the NodeMaintenance says so (drainTimeoutAction: Delete)")
	fs.IntVar(&f.gracePeriod, "grace-period", -1, "kubectl drain's; refused: an evicted pod gets its own terminationGracePeriodSeconds")
	fs.StringVar(&f.podSelector, "pod-selector", "", "kubectl drain's; refused: DrainRules and the pod label nodemaint.dev/drain=skip say which pods stay")
	fs.IntVar(&f.skipWaitForDelete, "skip-wait-for-delete-timeout", 0, "kubectl drain's; refused: the status names the pods stuck terminating, and spec.shutdown handles a node that was shut down")
	// kubectl's own --dry-run, parsed as kubectl parses it (dryRun).
	cmdutil.AddDryRunFlag(cmd)
	fs.Lookup("dry-run").Usage = `"none", "client" (print the preflight and the NodeMaintenance, write nothing) or "server" (the same, and send the NodeMaintenance to the API server as a dry run: validated, not stored)`
}

// dryRun is --dry-run, as kubectl reads it (its old boolean forms included).
func (f *kubectlDrainFlags) dryRun() (cmdutil.DryRunStrategy, error) {
	return cmdutil.GetDryRunStrategy(f.cmd)
}

// check refuses what nodemaint does not do, with the option that does it safely.
func (f *kubectlDrainFlags) check() error {
	switch {
	case f.force:
		return errors.New("--force: nodemaint evicts pods that no controller manages through their PodDisruptionBudgets once --response-timeout ran out (preflight lists them): drop --force")
	case f.disableEviction:
		return errors.New("--disable-eviction: nodemaint never deletes past a PodDisruptionBudget on its own; to delete what is left after a deadline, set the NodeMaintenance's drainTimeout with drainTimeoutAction: Delete")
	case f.cmd.Flags().Changed("grace-period"):
		return errors.New("--grace-period: with nodemaint an evicted pod gets its own terminationGracePeriodSeconds: drop --grace-period")
	case f.podSelector != "":
		return errors.New("--pod-selector: nodemaint drains every pod a DrainRule or the label nodemaint.dev/drain=skip does not keep: label or rule the pods to stay (preflight shows which move)")
	case f.cmd.Flags().Changed("skip-wait-for-delete-timeout"):
		return errors.New("--skip-wait-for-delete-timeout: nodemaint names the pods stuck terminating in the status; for a node that was shut down, see the NodeMaintenance's spec.shutdown")
	}
	return nil
}

// classic sets the kubectl drain helper of the fallback as kubectl drain would from the flags.
func (f *kubectlDrainFlags) classic(h *drain.Helper, dryRun cmdutil.DryRunStrategy) {
	h.IgnoreAllDaemonSets = f.ignoreDaemonSets
	h.DeleteEmptyDirData = f.deleteEmptyDirData || f.deleteLocalData
	h.Force = f.force
	h.DisableEviction = f.disableEviction
	h.GracePeriodSeconds = f.gracePeriod
	h.PodSelector = f.podSelector
	h.SkipWaitForDeleteTimeoutSeconds = f.skipWaitForDelete
	h.DryRunStrategy = dryRun
}
