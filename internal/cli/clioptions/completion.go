package clioptions

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// completionTimeout bounds the list a TAB waits for.
const completionTimeout = 5 * time.Second

// CompleteNames makes a command complete node names as arguments (nodeArgs) or NodeMaintenance
// names (otherwise), and NodeMaintenance names for its --name and --maintenance flags. The names
// are listed from the cluster the command's kubeconfig flags name, as kubectl's own completion
// does; kubectl calls the plugin's for `kubectl maintenance <TAB>` through
// kubectl_complete-maintenance.
func (o *Options) CompleteNames(cmd *cobra.Command, nodeArgs bool) {
	if nodeArgs {
		cmd.ValidArgsFunction = o.complete(&corev1.Node{})
	} else {
		cmd.ValidArgsFunction = o.complete(&nodemaintv1alpha1.NodeMaintenance{})
	}
	for _, flag := range []string{"name", "maintenance"} {
		if cmd.Flags().Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, o.complete(&nodemaintv1alpha1.NodeMaintenance{}))
		}
	}
}

// complete lists the names of the kind of obj that start with what is typed, but those already
// given.
func (o *Options) complete(obj client.Object) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, _, err := o.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		list := &metav1.PartialObjectMetadataList{}
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		gvk.Kind += "List"
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, item := range list.Items {
			if strings.HasPrefix(item.Name, toComplete) && !slices.Contains(args, item.Name) {
				names = append(names, item.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
