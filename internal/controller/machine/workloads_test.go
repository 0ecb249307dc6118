package machine

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestKubeconfigSelfContained: a kubeconfig Secret's credentials are its own; one that names
// files (nodemaint's own token, say) or runs programs is refused, and said.
func TestKubeconfigSelfContained(t *testing.T) {
	write := func(user clientcmdapi.AuthInfo, cluster clientcmdapi.Cluster) []byte {
		cfg := clientcmdapi.NewConfig()
		cluster.Server = "https://workload.example:6443"
		cfg.Clusters["c"], cfg.AuthInfos["u"] = &cluster, &user
		cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		cfg.CurrentContext = "x"
		b, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"inline token":              {write(clientcmdapi.AuthInfo{Token: "t"}, clientcmdapi.Cluster{CertificateAuthorityData: []byte("ca")}), ""},
		"inline certificate":        {write(clientcmdapi.AuthInfo{ClientCertificateData: []byte("c"), ClientKeyData: []byte("k")}, clientcmdapi.Cluster{}), ""},
		"nodemaint's own token":     {write(clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}, clientcmdapi.Cluster{}), "names a file"},
		"a client certificate file": {write(clientcmdapi.AuthInfo{ClientCertificate: "/etc/c.crt", ClientKey: "/etc/c.key"}, clientcmdapi.Cluster{}), "names a file"},
		"a CA file":                 {write(clientcmdapi.AuthInfo{Token: "t"}, clientcmdapi.Cluster{CertificateAuthority: "/etc/ca.crt"}), "certificate-authority file"},
		"exec":                      {write(clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1"}}, clientcmdapi.Cluster{}), "credential plugin"},
		"empty":                     {nil, "no key"},
		"garbage":                   {[]byte("{"), "not a kubeconfig"},
	} {
		_, err := restConfig(tc.data)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestWorkloads: a Cluster's client comes from its kubeconfig Secret, is kept while the Secret
// is the same, made again when it changes, and forgotten; the Cluster named Self is this
// cluster; a Cluster without a Secret is unreachable, and says why.
func TestWorkloads(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://workload.example:6443"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	kubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl" + KubeconfigSuffix}, Data: map[string][]byte{KubeconfigKey: kubeconfig}}
	secrets := fake.NewClientBuilder().WithObjects(secret).Build()
	local := fake.NewClientBuilder().Build()
	w := &Workloads{Local: local, Secrets: secrets, Self: types.NamespacedName{Namespace: "capi", Name: "mgmt"}}
	ctx := context.Background()

	self, err := w.Get(ctx, types.NamespacedName{Namespace: "capi", Name: "mgmt"})
	if err != nil || !self.Local || self.Client != local {
		t.Errorf("self: %+v %v", self, err)
	}
	wl := types.NamespacedName{Namespace: "capi", Name: "wl"}
	first, err := w.Get(ctx, wl)
	if err != nil || first.Local || w.Len() != 1 {
		t.Fatalf("workload: %+v %v", first, err)
	}
	if again, err := w.Get(ctx, wl); err != nil || again.Client != first.Client {
		t.Errorf("the same Secret made another client (%v)", err)
	}
	secret.Data[KubeconfigKey] = append([]byte(nil), kubeconfig...)
	secret.Labels = map[string]string{"changed": "true"}
	if err := secrets.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Get(ctx, wl); err != nil || changed.Client == first.Client || w.Len() != 1 {
		t.Errorf("a changed Secret kept the client (%v), %d held", err, w.Len())
	}
	w.Forget(wl)
	if w.Len() != 0 {
		t.Errorf("%d clients held after Forget", w.Len())
	}
	_, err = w.Get(ctx, types.NamespacedName{Namespace: "other", Name: "wl"})
	if why := Unreachable(err); !strings.Contains(why, "no kubeconfig Secret other/wl-kubeconfig") || !strings.Contains(why, "capi/mgmt") {
		t.Errorf("a Cluster without a Secret: %v", err)
	}
}
