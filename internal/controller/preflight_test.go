package controller_test

import (
	"context"
	"fmt"
	"testing"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// While a maintenance is Planning, its status says what a drain would meet, as `kubectl
// maintenance preflight` does; once it cordons, the preflight is gone.
func TestPreflightInStatusWhilePlanning(t *testing.T) {
	createNode(t, "pre-a", nil, false)
	createPod(t, "pre-bare", "pre-a") // no controller: lost once evicted
	createNM(t, "preflight-planned", false, false, "kernel upgrade", "pre-a")
	eventually(t, "the preflight in the status", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-planned")
		if err != nil || nm.Status.Preflight == nil {
			return false, "no preflight", err
		}
		p := nm.Status.Preflight
		for _, f := range p.Findings {
			if f.Node == "pre-a" && f.Severity == "Loses" && f.Reason == "BarePod" && f.Count == 1 && f.Pods[0] == "default/pre-bare" {
				return p.NodesLosing == 1 && p.Assumption != "", fmt.Sprintf("%+v", p), nil
			}
		}
		return false, fmt.Sprintf("%+v", p), nil
	})
	setNM(t, "preflight-planned", true, false)
	eventually(t, "the preflight gone once cordoned", func(ctx context.Context) (bool, string, error) {
		nm, err := getNM(ctx, "preflight-planned")
		return err == nil && nm.Status.Phase == nodemaintv1alpha1.PhaseCordon && nm.Status.Preflight == nil, fmt.Sprintf("phase %s, preflight %+v", nm.Status.Phase, nm.Status.Preflight), err
	})
}
