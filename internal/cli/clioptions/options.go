package clioptions

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Scheme knows the Kubernetes types and nodemaint's.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(nodemaintv1alpha1.AddToScheme(s))
	return s
}()

// ManagedByLabel with the value ManagedByPlugin marks the NodeMaintenances the plugin created,
// which complete deletes.
const (
	ManagedByLabel  = "app.kubernetes.io/managed-by"
	ManagedByPlugin = "kubectl-maintenance"
)

// Options are shared by every command.
type Options struct {
	Config  *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams
}

// NewOptions returns the options of the commands, with kubectl's kubeconfig flags but
// -n/--namespace: every object the commands name (nodes, NodeMaintenances) is cluster-scoped.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	config := genericclioptions.NewConfigFlags(true)
	config.Namespace = nil
	return &Options{Config: config, Streams: streams}
}

// Clients returns a client of the cluster the kubeconfig flags name, and a clientset.
func (o *Options) Clients() (client.WithWatch, kubernetes.Interface, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "kubectl-maintenance"
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return c, cs, err
}
