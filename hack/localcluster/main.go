// Command localcluster starts, inspects and stops the local development cluster: a real
// Kubernetes control plane with kwok playing the kubelets of fake nodes (see test/localcluster).
//
//	go run ./hack/localcluster up [--dir _output/cluster] [--nodes 5] [--bin-dir DIR]
//	go run ./hack/localcluster status [--dir _output/cluster]
//	go run ./hack/localcluster down [--dir _output/cluster]
//
// up leaves the cluster running in the background, on fixed ports, and reuses a running one.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaint/nodemaint/test/localcluster"
)

const usage = `usage: localcluster up|status|down [flags]

  up      start the cluster in the background, or reuse the running one
  status  show the cluster's processes and nodes
  down    stop every process of the cluster

Run "localcluster COMMAND -h" for the flags of a command.
`

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := flags.String("dir", "_output/cluster", "directory of the cluster")
	var err error
	switch os.Args[1] {
	case "up":
		nodes := flags.Int("nodes", 5, "number of fake nodes")
		binDir := flags.String("bin-dir", "", "directory of the control-plane binaries (default: built by hack/control-plane.sh)")
		realNodes := flags.Int("real-nodes", 0, "number of real nodes (0 or 1): a kubelet with containerd, runc and CNI plugins, as root")
		nodeBinDir := flags.String("node-bin-dir", "", "directory of the real node's binaries (default: built by hack/real-node.sh)")
		_ = flags.Parse(os.Args[2:])
		err = up(ctx, *dir, *binDir, *nodes, *realNodes, *nodeBinDir)
	case "status":
		_ = flags.Parse(os.Args[2:])
		err = status(ctx, *dir)
	case "down":
		_ = flags.Parse(os.Args[2:])
		err = localcluster.Stop(*dir)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		slog.Error("Failed", "command", os.Args[1], "err", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, dir, binDir string, nodes, realNodes int, nodeBinDir string) error {
	if binDir == "" {
		var err error
		if binDir, err = localcluster.BuildControlPlane(ctx, "."); err != nil {
			return fmt.Errorf("%w (run from the repository root, or pass --bin-dir)", err)
		}
	}
	if realNodes > 0 && nodeBinDir == "" {
		var err error
		if nodeBinDir, err = localcluster.BuildRealNode(ctx, "."); err != nil {
			return fmt.Errorf("%w (run from the repository root, or pass --node-bin-dir)", err)
		}
	}
	ports := localcluster.DefaultPorts
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: binDir, Nodes: nodes, Ports: &ports, RealNodes: realNodes, NodeBinDir: nodeBinDir})
	if err != nil {
		return err
	}
	if realNodes > 0 {
		fmt.Printf("\nThe real node %s runs a kubelet and containerd (logs: %s)\n", localcluster.RealNodeName, filepath.Join(c.Dir(), "logs"))
	}
	fmt.Printf(`
The cluster is up, with %d nodes: %s (EvictionRequest API: %v)
Use it with:

  export KUBECONFIG=%s
  export PATH=%s:$PATH
  kubectl get nodes

Stop it with "make cluster-down". Logs are in %s.

`, nodes, c.Server(), c.EvictionRequestAPI(), c.Kubeconfig(), c.BinDir(), filepath.Join(c.Dir(), "logs"))
	return nil
}

func status(ctx context.Context, dir string) error {
	c, err := localcluster.Open(dir)
	if err != nil {
		return fmt.Errorf("no cluster in %s: %w", dir, err)
	}
	pids := c.PIDs()
	components := localcluster.Components
	if c.HasRealNode() {
		components = append(components, localcluster.RealNodeComponents...)
	}
	for _, name := range components {
		if pid, ok := pids[name]; ok {
			fmt.Printf("%-24s pid %d\n", name, pid)
		} else {
			fmt.Printf("%-24s not running\n", name)
		}
	}
	if err := c.Healthy(ctx); err != nil {
		return fmt.Errorf("the cluster in %s does not run: %w", dir, err)
	}
	nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for i := range nodes.Items {
		if localcluster.IsNodeReady(&nodes.Items[i]) {
			ready++
		}
	}
	fmt.Printf("\n%d/%d nodes Ready, API server %s\nexport KUBECONFIG=%s\n",
		ready, len(nodes.Items), c.Server(), c.Kubeconfig())
	return nil
}
