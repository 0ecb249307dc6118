package phase

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/ptr"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
	"github.com/nodemaint/nodemaint/internal/cli/clioptions"
)

// kubectlDrainFlags are the flags of kubectl drain that runbooks type, on `drain` (--dry-run,
// which every command that writes takes, is NewCommand's). With nodemaint each sets the NodeMaintenance's field that does it
// (--pod-selector, --grace-period), is accepted where nodemaint already behaves so
// (--ignore-daemonsets, --delete-emptydir-data), or is refused with one line that names what
// nodemaint offers instead. In the classic fallback (--classic-fallback, on a cluster without
// nodemaint), they mean what they mean to kubectl drain.
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
	fs.IntVar(&f.gracePeriod, "grace-period", -1, "kubectl drain's: seconds each evicted pod gets to terminate, 1 to 86400 (spec.evictionGracePeriodSeconds); negative: each pod's own terminationGracePeriodSeconds. 0 (no grace at all) is refused. Pods their owners move (a Deployment's surge) terminate as their owners remove them")
	fs.StringVar(&f.podSelector, "pod-selector", "", "kubectl drain's: drain only the pods this label selector selects (spec.podSelector); the others stay, running, reported as skipped")
	fs.IntVar(&f.skipWaitForDelete, "skip-wait-for-delete-timeout", 0, "kubectl drain's; refused: the status names the pods stuck terminating, and spec.shutdown handles a node that was shut down")
}

// check refuses what nodemaint does not do, with the option that does it safely, and the
// values its fields do not take.
func (f *kubectlDrainFlags) check() error {
	_, podSelectorErr := clioptions.ParsePodSelector(f.podSelector)
	switch {
	case f.force:
		return errors.New("--force: nodemaint evicts pods that no controller manages through their PodDisruptionBudgets once --response-timeout ran out (preflight lists them): drop --force")
	case f.disableEviction:
		return errors.New("--disable-eviction: nodemaint never deletes past a PodDisruptionBudget on its own; to delete what is left after a deadline, set the NodeMaintenance's drainTimeout with drainTimeoutAction: Delete")
	case f.gracePeriod == 0:
		return errors.New("--grace-period=0: the pods would be killed at once, with no time to stop (kubectl's forced deletion); nodemaint gives each pod at least 1 second: use --grace-period=1, or drop it for each pod's own terminationGracePeriodSeconds")
	case f.gracePeriod > nodemaintv1alpha1.MaxEvictionGracePeriodSeconds:
		return fmt.Errorf("--grace-period=%d: at most %d seconds (24h); negative gives each pod its own terminationGracePeriodSeconds", f.gracePeriod, nodemaintv1alpha1.MaxEvictionGracePeriodSeconds)
	case podSelectorErr != nil:
		return podSelectorErr
	case f.cmd.Flags().Changed("skip-wait-for-delete-timeout"):
		return errors.New("--skip-wait-for-delete-timeout: nodemaint names the pods stuck terminating in the status; for a node that was shut down, see the NodeMaintenance's spec.shutdown")
	}
	return nil
}

// apply sets the spec's fields as the drain line says, as kubectl drain would take it: every
// line states its own drain, so spec.podSelector is --pod-selector's (none without it: every
// pod) and spec.evictionGracePeriodSeconds is --grace-period's (none without it or when negative:
// each pod's own). Running a line again that leaves them out drains every pod, as kubectl drain
// does; unlike --reason and --response-timeout, which are nodemaint's own and kept.
func (f *kubectlDrainFlags) apply(spec *nodemaintv1alpha1.NodeMaintenanceSpec) error {
	if f.cmd == nil {
		return nil // plan and cordon have none of these flags
	}
	sel, err := clioptions.ParsePodSelector(f.podSelector)
	if err != nil {
		return err
	}
	spec.PodSelector, spec.EvictionGracePeriodSeconds = sel, nil
	if f.gracePeriod > 0 {
		spec.EvictionGracePeriodSeconds = ptr.To(int64(f.gracePeriod))
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
