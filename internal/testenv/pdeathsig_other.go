//go:build !linux

package testenv

import (
	"os/exec"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startTiedToProcess starts env. Only on Linux do etcd and kube-apiserver die with a test process
// that ends without stopping them.
func startTiedToProcess(env *envtest.Environment) (*rest.Config, error) { return env.Start() }

// StartTied starts cmd. Only on Linux does it die with a test process that ends without stopping it.
func StartTied(cmd *exec.Cmd) error { return cmd.Start() }
