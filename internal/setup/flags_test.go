package setup

import (
	"testing"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		flag   string
		served bool
		want   nodemaintv1alpha1.EvacuationProtocol
		err    bool
	}{
		{protocolAuto, true, nodemaintv1alpha1.EvacuationProtocolEvictionRequest, false},
		{protocolAuto, false, nodemaintv1alpha1.EvacuationProtocolPodConditions, false},
		{"pod-conditions", true, nodemaintv1alpha1.EvacuationProtocolPodConditions, false},
		{"eviction-request", true, nodemaintv1alpha1.EvacuationProtocolEvictionRequest, false},
		{"eviction-request", false, "", true},
		{"conditions", true, "", true},
	} {
		got, err := Protocol(tc.flag, tc.served)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("Protocol(%q, %v) = %q, %v; want %q, error %v", tc.flag, tc.served, got, err, tc.want, tc.err)
		}
	}
}

// TestProtocolFlag: every protocol has a flag value, read back as that protocol.
func TestProtocolFlag(t *testing.T) {
	for _, p := range []nodemaintv1alpha1.EvacuationProtocol{nodemaintv1alpha1.EvacuationProtocolPodConditions, nodemaintv1alpha1.EvacuationProtocolEvictionRequest} {
		if got, err := Protocol(ProtocolFlag(p), true); got != p || err != nil {
			t.Errorf("Protocol(ProtocolFlag(%s)) = %q, %v", p, got, err)
		}
	}
}
