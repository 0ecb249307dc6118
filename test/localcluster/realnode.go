package localcluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The real node: a kubelet, containerd (with runc and its shim), kube-proxy and the CNI plugins
// bridge, host-local and loopback, built by hack/real-node.sh, running pods for real beside the
// kwok nodes. It needs root (cgroups, mounts, network namespaces, nftables). There is one per
// machine: its kubelet uses the cgroups under /nodemaint-realnode (realnode_host.go), its network
// the bridge realNodeBridge, and the paths below, which are short because unix socket paths are
// limited to 108 bytes. What it changes on the machine besides, `make cluster-down` undoes.
//
// Its pods reach the API server as in any cluster: kube-apiserver listens on the node's address
// on the bridge (Cluster.APIServerHost), which the kubernetes Service's endpoints name, and
// kube-proxy (nftables mode) routes the Services' addresses, to which the pods have a route
// through the bridge. containerd pulls from the registries the test names (TrustRegistry).
//
// The kubelet runs in a mount namespace of its own where /proc/sys/kernel/random/boot_id is
// the file <dir>/realnode/boot_id, so that RebootRealNode gives the node a new boot ID. Its root
// directory is a shared mount, so that the volumes it mounts there reach containerd and runc.
//
// The pods' subnet realNodeSubnet is one no common default uses, so that the bridge's route
// shadows nothing on a developer's machine: not podman's 10.88/16, flannel's 10.244/16, k3s's
// 10.42/16 and 10.43/16, microk8s's 10.1/16, weave's 10.32/12, the services' 10.96/12,
// OpenShift Local's 10.217.0.0/22, GCE's auto-mode subnets (in 10.128/9, even second octets),
// docker's 172.17/16 and its pools, nor 192.168/16.
const (
	// RealNodeName is the name of the real node.
	RealNodeName = "realnode-0"
	// RealNodeLabel, with the value "true", is on the real node (kwok does not select it).
	RealNodeLabel = "nodemaint.dev/real-node"

	realNodeLib     = "/var/lib/nodemaint-realnode"
	realNodeRun     = "/run/nodemaint-realnode"
	realNodeSocket  = realNodeRun + "/containerd.sock"
	realNodeKubelet = realNodeLib + "/kubelet"
	realNodePodLogs = realNodeLib + "/pod-logs"
	// containerLogLinks is where the kubelet links the containers' logs (not configurable).
	containerLogLinks = "/var/log/containers"
	realNodeBridge    = "nmreal0"
	realNodeSubnet    = "10.217.77.0/24"
	realNodeIP        = "10.217.77.1"
	realNodeNetwork   = "nodemaint-realnode"
	containerdName    = "containerd"
	kubeletName       = "kubelet"
	kubeProxyName     = "kube-proxy"
	realNodeReadyMax  = 2 * time.Minute
	// kubeProxyTable is the nftables table (families ip and ip6) kube-proxy writes; its name is
	// fixed, so a host whose own kube-proxy has it cannot have a real node.
	kubeProxyTable = "kube-proxy"
	// kubeProxyMarker, in realNodeRun, says the kube-proxy tables are the real node's, to remove.
	kubeProxyMarker = "kube-proxy-tables"
	// kubeProxyHealthz is kube-proxy's health endpoint.
	kubeProxyHealthz = "127.0.0.1:10256"
)

// RealNodeComponents are the processes of the real node, in start order.
var RealNodeComponents = []string{containerdName, kubeletName, kubeProxyName}

// RealNodeBinDirEnv names the directory of the real node's binaries (hack/real-node.sh).
const RealNodeBinDirEnv = "NODEMAINT_REAL_NODE_BIN_DIR"

func (c *Cluster) realNodeDir(elem ...string) string {
	return filepath.Join(append([]string{c.dir, "realnode"}, elem...)...)
}

// prepareRealNode claims the machine's real node for the cluster, removes what a previous one
// left and sets up the pods' bridge, before the control plane starts: kube-apiserver listens on
// the node's address on it.
func (c *Cluster) prepareRealNode() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root: cgroups, mounts and network namespaces")
	}
	if c.nodeBinDir == "" {
		return errors.New("no binaries for the real node (hack/real-node.sh; --node-bin-dir or $" + RealNodeBinDirEnv + ")")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return errors.New("the real node's kube-proxy needs nft: apt-get install nftables (make test-deps)")
	}
	owner, err := os.ReadFile(filepath.Join(realNodeRun, "cluster"))
	if err == nil && string(owner) != c.dir {
		for _, name := range RealNodeComponents {
			if _, ok := runningPid(string(owner), name); ok {
				return fmt.Errorf("the real node of the cluster in %s runs; there is one per machine (stop that cluster first)", owner)
			}
		}
	}
	// What a previous real node left: containers, mounts, network namespaces, cgroups, tables;
	// and the settings of one that was not stopped, before they are taken for the machine's own.
	if err := cleanRealNode(c.log); err != nil {
		return err
	}
	if len(owner) > 0 {
		if err := errors.Join(restoreHostSysctls(c.log, string(owner)), restoreCgroupControllers(c.log, string(owner)), removeHostDirs(string(owner))); err != nil {
			return err
		}
	}
	for _, family := range []string{"ip", "ip6"} {
		if nftTableExists(family, kubeProxyTable) {
			return fmt.Errorf("this machine has the nftables table %s %s (its own kube-proxy?), which the real node's kube-proxy would share: no real node here", family, kubeProxyTable)
		}
	}
	for _, d := range []string{c.realNodeDir("cni"), c.realNodeDir("certs.d"), realNodeLib, realNodeRun, realNodeKubelet} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(realNodeRun, "cluster"), []byte(c.dir), 0o644); err != nil {
		return err
	}
	return setUpBridge()
}

// startRealNode starts the real node that prepareRealNode set up, once the control plane runs,
// and waits until it is Ready and kube-proxy has written the Services' rules.
func (c *Cluster) startRealNode(ctx context.Context, repoRoot string) error {
	if err := c.writeRealNodeConfigs(); err != nil {
		return err
	}
	if err := c.recordHostDirs(); err != nil {
		return err
	}
	if err := c.enableCgroupControllers(); err != nil {
		return err
	}
	if err := createCgroup(realNodeCgroupRoot); err != nil {
		return err
	}
	if err := c.setHostSysctls(KubeletSysctls); err != nil {
		return err
	}
	if err := newBootID(c.realNodeDir("boot_id")); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	images := c.realNodeDir("images.tar")
	if err := writeNodeImages(ctx, repoRoot, images); err != nil {
		return err
	}
	if out, err := c.ctr("images", "import", "--no-unpack=false", images); err != nil {
		return fmt.Errorf("importing the node's images: %w\n%s", err, out)
	}
	// The kubelet's root directory is a shared mount: the mounts the kubelet makes there, in its
	// own mount namespace, propagate to containerd's.
	if err := run("mount", "--bind", realNodeKubelet, realNodeKubelet); err != nil {
		return err
	}
	if err := run("mount", "--make-rshared", realNodeKubelet); err != nil {
		return err
	}
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	if err := c.waitRealNodeReady(ctx); err != nil {
		return err
	}
	return c.startKubeProxy(ctx)
}

// realNodeAPIServerArgs are kube-apiserver's flags for the real node's kubelet: it dials the
// node's InternalIP (its hostname, realnode-0, resolves nowhere), verifies the kubelet's serving
// certificate with the cluster's CA and authenticates as kube-apiserver-kubelet-client, so that
// kubectl logs, exec and port-forward reach the real node's pods.
func (c *Cluster) realNodeAPIServerArgs() []string {
	pki := func(file string) string { return filepath.Join(c.dir, "pki", file) }
	return []string{
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + pki("ca.crt"),
		"--kubelet-client-certificate=" + pki("kube-apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("kube-apiserver-kubelet-client.key"),
	}
}

// writeRealNodeConfigs writes the kubelet's certificates, kubeconfig and configuration,
// containerd's configuration and the CNI network.
func (c *Cluster) writeRealNodeConfigs() error {
	pkiDir := filepath.Join(c.dir, "pki")
	ca, err := readKeyPair(pkiDir, "ca")
	if err != nil {
		return err
	}
	now := time.Now()
	client, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return err
	}
	if err := client.write(pkiDir, "kubelet-client"); err != nil {
		return err
	}
	serving, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{RealNodeName, "localhost"},
		IPAddresses: []net.IP{net.ParseIP(realNodeIP), net.IPv4(127, 0, 0, 1)},
	}, ca)
	if err != nil {
		return err
	}
	if err := serving.write(pkiDir, "kubelet-serving"); err != nil {
		return err
	}
	if err := c.WriteKubeconfig(c.realNodeDir("kubelet.kubeconfig"), &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(pkiDir, "kubelet-client.crt"),
		ClientKey:         filepath.Join(pkiDir, "kubelet-client.key"),
	}); err != nil {
		return err
	}

	if err := c.WriteKubeconfig(c.realNodeDir("kube-proxy.kubeconfig"), &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(pkiDir, "kube-proxy.crt"),
		ClientKey:         filepath.Join(pkiDir, "kube-proxy.key"),
	}); err != nil {
		return err
	}
	// nftables mode, the mode of new clusters. The conntrack table's size and timeouts stay the
	// machine's (0: leave as is); NodePorts only on the node's address.
	kubeProxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %[1]s}
hostnameOverride: %[2]s
clusterCIDR: %[3]s
nodePortAddresses: [%[4]s/32]
healthzBindAddress: %[5]s
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, c.realNodeDir("kube-proxy.kubeconfig"), RealNodeName, realNodeSubnet, realNodeIP, kubeProxyHealthz)
	if err := os.WriteFile(c.realNodeDir("kube-proxy.yaml"), []byte(kubeProxy), 0o644); err != nil {
		return err
	}

	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1; the kubelet 1.37 still runs there once told to.
failCgroupV1: false
cgroupDriver: cgroupfs
# The pods' cgroups under the node's own (/nodemaint-realnode/kubepods), not the host's /kubepods.
cgroupRoot: /%[5]s
# Fail rather than change the kernel settings it wants: the harness sets them and cluster-down
# restores them (KubeletSysctls).
protectKernelDefaults: true
# No iptables chains of the kubelet's on the host (KUBE-FIREWALL, KUBE-IPTABLES-HINT, canaries).
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: %[3]s/kubelet-serving.crt
tlsPrivateKeyFile: %[3]s/kubelet-serving.key
rotateCertificates: false
serverTLSBootstrap: false
failSwapOn: false
maxPods: 30
# The machine's disk is shared with everything else: evict only near a full disk, and never
# collect the imported images (they cannot be pulled again).
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionPressureTransitionPeriod: 10s
# How often the kubelet measures volumes (1m by default): an emptyDir past its sizeLimit is
# evicted within seconds rather than a minute.
volumeStatsAggPeriod: 5s
serializeImagePulls: false
resolvConf: /etc/resolv.conf
shutdownGracePeriod: 0s
# The containers' logs, under the node's directory rather than /var/log/pods; the kubelet's
# links to them in /var/log/containers are removed with the node.
podLogsDir: %[4]s
`, realNodeSocket, realNodeIP, pkiDir, realNodePodLogs, realNodeCgroupRoot)
	if err := os.WriteFile(c.realNodeDir("kubelet.yaml"), []byte(kubelet), 0o644); err != nil {
		return err
	}

	containerd := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[5]q
    # hosts.toml of the registries the tests serve (TrustRegistry), read at each pull.
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %[10]q

  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # Without CAP_SYS_RESOURCE (this machine's root lacks it) no process may lower its
    # oom_score_adj, which runc does for the sandboxes (-998): keep them at containerd's own.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[6]q
          Root = %[7]q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[8]q]
      conf_dir = %[9]q
      max_conf_num = 1
`, filepath.Join(realNodeLib, "containerd"), filepath.Join(realNodeRun, "containerd"), realNodeSocket,
		realNodeSocket+".ttrpc", PauseImage, filepath.Join(c.nodeBinDir, "runc"), filepath.Join(realNodeRun, "runc"),
		c.nodeBinDir, c.realNodeDir("cni"), c.realNodeDir("certs.d"))
	if err := os.WriteFile(c.realNodeDir("containerd.toml"), []byte(containerd), 0o644); err != nil {
		return err
	}

	// No masquerading and no default route in the pods: they talk to the node, to each other
	// and to the Services (through the node, where kube-proxy routes them), and nowhere else.
	// Not a gateway: the node's address is on the bridge already (setUpBridge), and the bridge
	// plugin would turn the host's IP forwarding on for every pod.
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": %q, "gw": %q}], "dataDir": %q}
    },
    {"type": "loopback"}
  ]
}
`, realNodeNetwork, realNodeBridge, realNodeSubnet, realNodeIP, serviceClusterIPRange, realNodeIP, filepath.Join(realNodeLib, "cni"))
	return os.WriteFile(c.realNodeDir("cni", "10-nodemaint-realnode.conflist"), []byte(cni), 0o644)
}

// readKeyPair reads <name>.crt and <name>.key of dir.
func readKeyPair(dir, name string) (*keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s: no PEM", filepath.Join(dir, name))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// newBootID writes a new random boot ID (a UUID, as the kernel's) to path.
func newBootID(path string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	return os.WriteFile(path, []byte(id), 0o644)
}

// setUpBridge creates the pods' bridge with the node's address, before the kubelet starts: the
// kubelet's node IP must be an address of the host.
func setUpBridge() error {
	if _, err := net.InterfaceByName(realNodeBridge); err != nil {
		if err := run("ip", "link", "add", realNodeBridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := run("ip", "addr", "replace", realNodeIP+"/24", "dev", realNodeBridge); err != nil {
		return err
	}
	return run("ip", "link", "set", realNodeBridge, "up")
}

// startContainerd starts containerd and waits until it answers.
func (c *Cluster) startContainerd(ctx context.Context) error {
	exited, err := c.startNodeProcess(containerdName, filepath.Join(c.nodeBinDir, "containerd"),
		"--config", c.realNodeDir("containerd.toml"))
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, containerdName, exited, func(context.Context) error {
		_, err := c.ctr("version")
		return err
	})
}

// startKubelet starts the kubelet in a mount namespace of its own, with the node's boot_id file
// over the kernel's.
func (c *Cluster) startKubelet(ctx context.Context) error {
	kubelet := filepath.Join(c.nodeBinDir, "kubelet")
	script := `mount --make-rprivate /proc && mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"`
	exited, err := c.startNodeProcess(kubeletName, "unshare", "--mount", "--propagation", "unchanged", "--",
		"/bin/sh", "-c", script, c.realNodeDir("boot_id"),
		kubelet,
		"--config="+c.realNodeDir("kubelet.yaml"),
		"--kubeconfig="+c.realNodeDir("kubelet.kubeconfig"),
		"--root-dir="+realNodeKubelet,
		"--cert-dir="+filepath.Join(realNodeKubelet, "pki"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+realNodeIP,
		"--node-labels="+RealNodeLabel+"=true,"+NodeTypeLabel+"=real",
		"--v=2",
	)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, kubeletName, exited, func(ctx context.Context) error {
		return httpGetOK(ctx, "http://127.0.0.1:10248/healthz")
	})
}

// startKubeProxy starts kube-proxy and waits until it has written the Services' rules. Its PATH
// holds nft alone: at start, kube-proxy in nftables mode removes the rules of the other modes'
// kube-proxies (iptables chains, IPVS services) it finds with iptables and modprobe, which would
// be the machine's own.
func (c *Cluster) startKubeProxy(ctx context.Context) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return errors.New("the real node's kube-proxy needs nft: apt-get install nftables (make test-deps)")
	}
	path := c.realNodeDir("kube-proxy-path")
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(nft, filepath.Join(path, "nft")); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.WriteFile(filepath.Join(realNodeRun, kubeProxyMarker), nil, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.nodeBinDir, kubeProxyName), "--config="+c.realNodeDir("kube-proxy.yaml"), "--v=2")
	exited, err := c.startCommand(kubeProxyName, cmd, "PATH="+path)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, kubeProxyName, exited, func(ctx context.Context) error {
		return httpGetOK(ctx, "http://"+kubeProxyHealthz+"/healthz")
	})
}

// TrustRegistry lets the real node's containerd pull from the registry at host (host:port) over
// plain HTTP: a registry the test serves on loopback.
func (c *Cluster) TrustRegistry(host string) error {
	dir := c.realNodeDir("certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// KillRealNodeContainer SIGKILLs the real node's container id (a pod status's containerID
// without its containerd:// prefix), as a crash does; the kubelet restarts it.
func (c *Cluster) KillRealNodeContainer(id string) error {
	if out, err := c.ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("ctr tasks kill %s: %w\n%s", id, err, out)
	}
	return nil
}

// ImportRealNodeImages imports the image archive at path (docker save's, or an OCI image layout
// as a tar) into the real node's containerd, as `ctr images import` does.
func (c *Cluster) ImportRealNodeImages(path string) error {
	if out, err := c.ctr("images", "import", path); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", path, err, out)
	}
	return nil
}

// RealNodeImages lists the names of the images the real node's containerd has.
func (c *Cluster) RealNodeImages() ([]string, error) {
	out, err := c.ctr("images", "list", "--quiet")
	if err != nil {
		return nil, fmt.Errorf("ctr images list: %w\n%s", err, out)
	}
	return strings.Fields(string(out)), nil
}

// nftTableExists reports whether the machine has the nftables table name of family.
func nftTableExists(family, name string) bool {
	return exec.Command("nft", "list", "table", family, name).Run() == nil
}

// waitRealNodeReady waits until the real node is Ready and schedulable.
func (c *Cluster) waitRealNodeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, realNodeReadyMax)
	defer cancel()
	start := time.Now()
	err := c.waitNodesReadySelector(ctx, []string{RealNodeName}, RealNodeLabel+"=true")
	if err != nil {
		return fmt.Errorf("the real node: %w (logs: %s, %s)", err, logPath(c.dir, kubeletName), logPath(c.dir, containerdName))
	}
	c.log.Info("The real node is Ready", "node", RealNodeName, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// ctr runs containerd's ctr against the real node's containerd, in the k8s.io namespace.
func (c *Cluster) ctr(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, filepath.Join(c.nodeBinDir, "ctr"),
		append([]string{"--address", realNodeSocket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// startNodeProcess starts a process of the real node as startProcess does the control plane's.
func (c *Cluster) startNodeProcess(name, path string, args ...string) (<-chan struct{}, error) {
	return c.startCommand(name, exec.Command(path, args...), "PATH="+c.nodeBinDir+":"+os.Getenv("PATH"))
}

// ShutDownRealNode shuts the real node down, as a reboot does first: the kubelet stops (the
// node's status and Lease are no longer renewed), every container of the node is killed and
// containerd stops. BootRealNode starts it again.
func (c *Cluster) ShutDownRealNode() error {
	if err := c.StopRealNodeKubelet(); err != nil {
		return err
	}
	if err := killCgroup(c.log, realNodeCgroupRoot); err != nil {
		return err
	}
	if err := stopProcesses(c.log, c.dir, containerdName); err != nil {
		return err
	}
	killShims(c.log)
	return nil
}

// BootRealNode boots the real node that ShutDownRealNode shut down: with a new boot ID,
// containerd starts, then the kubelet. It returns once the kubelet runs, not waiting for the
// node to be Ready.
func (c *Cluster) BootRealNode(ctx context.Context) error {
	if err := newBootID(c.realNodeDir("boot_id")); err != nil {
		return err
	}
	if _, ok := runningPid(c.dir, containerdName); !ok {
		if err := c.startContainerd(ctx); err != nil {
			return err
		}
	}
	return c.StartRealNodeKubelet(ctx)
}

// StopRealNodeKubelet stops the real node's kubelet; its containers go on running.
func (c *Cluster) StopRealNodeKubelet() error { return stopProcesses(c.log, c.dir, kubeletName) }

// StartRealNodeKubelet starts the real node's kubelet again after StopRealNodeKubelet.
func (c *Cluster) StartRealNodeKubelet(ctx context.Context) error {
	if _, ok := runningPid(c.dir, kubeletName); ok {
		return nil
	}
	return c.startKubelet(ctx)
}

// RealNodeBootID returns the boot ID the real node's kubelet reads.
func (c *Cluster) RealNodeBootID() (string, error) {
	b, err := os.ReadFile(c.realNodeDir("boot_id"))
	return strings.TrimSpace(string(b)), err
}

// HasRealNode reports whether the cluster was started with a real node.
func (c *Cluster) HasRealNode() bool { return c.realNodes > 0 }

// stopRealNode stops the real node of the cluster in dir, if it has one, and removes what it
// left on the machine: containers, mounts, network namespaces, the bridge, cgroups; and writes
// back the kernel settings it changed.
func stopRealNode(log *slog.Logger, dir string) error {
	owner, err := os.ReadFile(filepath.Join(realNodeRun, "cluster"))
	if err != nil || string(owner) != dir {
		return errors.Join(restoreHostSysctls(log, dir), restoreCgroupControllers(log, dir), removeHostDirs(dir))
	}
	errs := []error{stopProcesses(log, dir, kubeProxyName, kubeletName), killCgroup(log, realNodeCgroupRoot)}
	errs = append(errs, stopProcesses(log, dir, containerdName))
	killShims(log)
	errs = append(errs, cleanRealNode(log), restoreHostSysctls(log, dir), restoreCgroupControllers(log, dir), removeHostDirs(dir))
	return errors.Join(errs...)
}

// killShims SIGKILLs the containerd shims of the real node's containerd.
func killShims(log *slog.Logger) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "containerd-shim-runc-v2" && slices.Contains(args, realNodeSocket) {
			log.Info("Killing a containerd shim", "pid", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// cleanRealNode removes what a stopped real node left: its mounts (deepest first), the bridge,
// its cgroups and its directories.
func cleanRealNode(log *slog.Logger) error {
	if err := killCgroup(log, realNodeCgroupRoot); err != nil {
		return err
	}
	killShims(log)
	var errs []error
	mounts, err := mountsUnder(realNodeLib, realNodeRun)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	if _, err := net.InterfaceByName(realNodeBridge); err == nil {
		errs = append(errs, run("ip", "link", "del", realNodeBridge))
	}
	// kube-proxy's tables, when the real node's kube-proxy made them (never the machine's own).
	if _, err := os.Stat(filepath.Join(realNodeRun, kubeProxyMarker)); err == nil {
		for _, family := range []string{"ip", "ip6"} {
			if nftTableExists(family, kubeProxyTable) {
				errs = append(errs, run("nft", "delete", "table", family, kubeProxyTable))
			}
		}
	}
	errs = append(errs, removeCgroups(realNodeCgroupRoot), removeCNICache())
	links, _ := os.ReadDir(containerLogLinks)
	for _, l := range links {
		path := filepath.Join(containerLogLinks, l.Name())
		if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, realNodeLib+"/") {
			errs = append(errs, os.Remove(path))
		}
	}
	errs = append(errs, os.RemoveAll(realNodeLib), os.RemoveAll(realNodeRun))
	return errors.Join(errs...)
}

// mountsUnder lists the mount points under the directories, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				mounts = append(mounts, mp)
			}
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return mounts, s.Err()
}

// run runs a command, returning its output in the error when it fails.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// httpGetOK GETs url and fails unless the answer is 200.
func httpGetOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
