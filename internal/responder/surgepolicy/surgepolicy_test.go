package surgepolicy

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaint/nodemaint/pkg/evacuation"
)

func TestMaxSurge(t *testing.T) {
	for name, tc := range map[string]struct {
		strategy appsv1.DeploymentStrategy
		replicas int32
		want     int32
		wantErr  bool
	}{
		"absolute":              {strategy: rolling(intstr.FromInt32(2)), replicas: 10, want: 2},
		"percent rounds up":     {strategy: rolling(intstr.FromString("25%")), replicas: 1, want: 1},
		"percent of 10":         {strategy: rolling(intstr.FromString("25%")), replicas: 10, want: 3},
		"zero":                  {strategy: rolling(intstr.FromInt32(0)), replicas: 10, want: 0},
		"zero percent":          {strategy: rolling(intstr.FromString("0%")), replicas: 10, want: 0},
		"default when unset":    {strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}, replicas: 4, want: 1},
		"recreate":              {strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, replicas: 4, want: 0},
		"invalid percent":       {strategy: rolling(intstr.FromString("lots")), replicas: 4, wantErr: true},
		"percent of 0 replicas": {strategy: rolling(intstr.FromString("50%")), replicas: 0, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: tc.strategy}}
			got, err := MaxSurge(d, tc.replicas)
			if (err != nil) != tc.wantErr {
				t.Errorf("MaxSurge error %v; want an error: %t", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("MaxSurge = %d; want %d", got, tc.want)
			}
		})
	}
}

func TestEligible(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate      func(*appsv1.Deployment)
		replicaSet  int
		autoscalers int
		wantOK      bool
		wantReason  string
	}{
		"rolling update with surge": {wantOK: true},
		"replicas 0":                {mutate: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }},
		"recreate": {mutate: func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}, wantReason: ReasonRecreate},
		"maxSurge 0":          {mutate: func(d *appsv1.Deployment) { d.Spec.Strategy = rolling(intstr.FromInt32(0)) }, wantReason: ReasonMaxSurgeZero},
		"paused":              {mutate: func(d *appsv1.Deployment) { d.Spec.Paused = true }, wantReason: ReasonPaused},
		"one autoscaler":      {autoscalers: 1, wantOK: true},
		"two autoscalers":     {autoscalers: 2, wantReason: ReasonAutoscaled},
		"rollout in progress": {replicaSet: 2, wantReason: ReasonRollout},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDeployment(3, 1)
			if tc.mutate != nil {
				tc.mutate(d)
			}
			el := Eligible(d, *d.Spec.Replicas, max(tc.replicaSet, 1), tc.autoscalers)
			if el.OK != tc.wantOK {
				t.Errorf("eligible = %+v; want ok %t", el, tc.wantOK)
			}
			if el.Reason != tc.wantReason {
				t.Errorf("eligible reason %q; want %q", el.Reason, tc.wantReason)
			}
		})
	}
}

// TestSurgesReadsTheRecord: during a surge, whether the Deployment surges is decided on its
// original replicas, from the surge record, not on its raised spec.replicas; an HPA that targets
// it is recognised by kind, name and group.
func TestSurgesReadsTheRecord(t *testing.T) {
	d := newDeployment(0, 1)
	if ok, _, _ := Surges(d, nil, 0); ok {
		t.Error("a Deployment of 0 replicas surges")
	}
	rec := State{OriginalReplicas: 2, Surge: 1, StartTime: metav1.NewMicroTime(time.Unix(1000, 0))}
	d.Annotations = map[string]string{evacuation.SurgeAnnotation: rec.String()}
	if ok, reason, msg := Surges(d, nil, 0); !ok {
		t.Errorf("a Deployment of 2 original replicas does not surge: %s %s", reason, msg)
	}
	if got, err := Parse(d); err != nil || *got != rec {
		t.Errorf("Parse = %+v, %v; want %+v", got, err, rec)
	}
	d.Annotations[evacuation.SurgeAnnotation] = `{"originalReplicas":2}`
	if _, err := Parse(d); err == nil {
		t.Error("a record without surge and start time parses")
	}
	hpa := func(apiVersion, kind, name string) bool {
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: name}
		return Autoscales(h, "web")
	}
	for _, tc := range []struct {
		apiVersion, kind, name string
		want                   bool
	}{
		{"apps/v1", "Deployment", "web", true},
		{"apps/v1", "StatefulSet", "web", false},
		{"apps/v1", "Deployment", "api", false},
		{"example.com/v1", "Deployment", "web", false},
	} {
		if got := hpa(tc.apiVersion, tc.kind, tc.name); got != tc.want {
			t.Errorf("Autoscales(HPA of %s %s %s) = %t; want %t (exactly the HPAs of apps' Deployment web)", tc.apiVersion, tc.kind, tc.name, got, tc.want)
		}
	}
}

func rolling(maxSurge intstr.IntOrString) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge},
	}
}

func newDeployment(replicas, maxSurge int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Strategy: rolling(intstr.FromInt32(maxSurge))},
	}
}

// TestParseBounds: the record of raised bounds reads back as written; one that names no
// Deployment, or says nothing was set, is refused.
func TestParseBounds(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	b, err := ParseBounds(hpa)
	if err != nil {
		t.Errorf("ParseBounds of no record: %v; want no error", err)
	}
	if b != nil {
		t.Errorf("ParseBounds of no record = %v; want nil", b)
	}
	rec := Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), SetMaxReplicas: ptr.To[int32](4)}
	hpa.Annotations = map[string]string{evacuation.SurgeBoundsAnnotation: rec.String()}
	if got, err := ParseBounds(hpa); err != nil || got.String() != rec.String() {
		t.Errorf("ParseBounds = %v, %v; want %v", got, err, &rec)
	}
	for _, bad := range []string{`{`, `{"maxReplicas":3,"setMinReplicas":4}`, `{"deployment":"web","maxReplicas":3}`} {
		hpa.Annotations[evacuation.SurgeBoundsAnnotation] = bad
		if _, err := ParseBounds(hpa); err == nil {
			t.Errorf("ParseBounds(%s) = no error", bad)
		}
	}
}

// TestRecordsNameTheirObject: a surge record, a record of raised bounds or a count of surges set
// back that names another object's UID is refused, as is a surge from no replicas (nodemaint
// never makes one), or bounds below 1; a surge or bounds record naming no UID is the previous
// version's (Legacy), read; a count of surges set back must name its Deployment.
func TestRecordsNameTheirObject(t *testing.T) {
	d := newDeployment(3, 1)
	d.UID = "d"
	start := metav1.NewMicroTime(time.Now())
	for name, tc := range map[string]struct {
		state      State
		wantErr    bool
		wantLegacy bool
	}{
		"its own":                  {state: State{OriginalReplicas: 2, Surge: 1, StartTime: start, UID: "d"}},
		"another's":                {state: State{OriginalReplicas: 2, Surge: 1, StartTime: start, UID: "e"}, wantErr: true},
		"the previous version's":   {state: State{OriginalReplicas: 2, Surge: 1, StartTime: start}, wantLegacy: true},
		"from no replicas":         {state: State{OriginalReplicas: 0, Surge: 3, StartTime: start, UID: "d"}, wantErr: true},
		"from no replicas, no UID": {state: State{OriginalReplicas: 0, Surge: 3, StartTime: start}, wantErr: true},
	} {
		d.Annotations = map[string]string{evacuation.SurgeAnnotation: tc.state.String()}
		got, err := Parse(d)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: Parse error %v; want an error: %t", name, err, tc.wantErr)
		}
		if err == nil && got.Legacy() != tc.wantLegacy {
			t.Errorf("%s: Parse = %v, legacy %t; want legacy %t", name, got, got.Legacy(), tc.wantLegacy)
		}
	}

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{UID: "h"}}
	hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas = ptr.To[int32](4), 4
	surge := &State{OriginalReplicas: 3, Surge: 1, StartTime: start, UID: "d"}
	for name, tc := range map[string]struct {
		rec     Bounds
		wantErr bool
		names   bool // Names(hpa, d)
		ownMin  int32
	}{
		"its own":                           {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: surge}, names: true, ownMin: 3},
		"another autoscaler's":              {rec: Bounds{UID: "x", Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: surge}, wantErr: true, ownMin: 4},
		"the previous version's":            {rec: Bounds{Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: surge}, ownMin: 3},
		"another Deployment's surge":        {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: &State{OriginalReplicas: 3, Surge: 1, StartTime: start, UID: "e"}}, ownMin: 3},
		"a surge of the previous version's": {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](3), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: &State{OriginalReplicas: 3, Surge: 1, StartTime: start}}, ownMin: 3},
		"minReplicas 0 before":              {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](0), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: surge}, wantErr: true, ownMin: 4},
		"a surge from 0":                    {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](1), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](4), Surge: &State{OriginalReplicas: 0, Surge: 4, StartTime: start, UID: "d"}}, wantErr: true, ownMin: 4},
		"not the minReplicas held":          {rec: Bounds{UID: "h", Deployment: "web", MinReplicas: ptr.To[int32](1), MaxReplicas: 3, SetMinReplicas: ptr.To[int32](5), Surge: surge}, names: true, ownMin: 4},
	} {
		hpa.Annotations = map[string]string{evacuation.SurgeBoundsAnnotation: tc.rec.String()}
		got, err := ParseBounds(hpa)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: ParseBounds error %v; want an error: %t", name, err, tc.wantErr)
		}
		if err == nil && got.Names(hpa, d) != tc.names {
			t.Errorf("%s: ParseBounds = %v, names the autoscaler and Deployment %t; want %t", name, got, !tc.names, tc.names)
		}
		if own := OwnMinReplicas(hpa, "web"); own != tc.ownMin {
			t.Errorf("%s: OwnMinReplicas = %d, want %d", name, own, tc.ownMin)
		}
	}

	for value, wantErr := range map[string]bool{
		(&Reverted{UID: "d", Count: 1, Replicas: 3}).String(): false,
		(&Reverted{UID: "e", Count: 1, Replicas: 3}).String(): true,
		(&Reverted{Count: 1, Replicas: 3}).String():           true,
		(&Reverted{UID: "d", Count: 0, Replicas: 3}).String(): true,
		`{`: true,
	} {
		d.Annotations = map[string]string{evacuation.SurgeRevertedAnnotation: value}
		if _, err := ParseReverted(d); (err != nil) != wantErr {
			t.Errorf("ParseReverted(%s) = %v, want an error: %t", value, err, wantErr)
		}
	}
	ok := Eligibility{OK: true, Surge: 1}
	if el := (&Reverted{UID: "d", Count: RevertLimit - 1, Replicas: 3}).Eligible(ok); !el.OK {
		t.Errorf("surges set back %d times: %+v, want eligible", RevertLimit-1, el)
	}
	if el := (&Reverted{UID: "d", Count: RevertLimit, Replicas: 3}).Eligible(ok); el.OK {
		t.Errorf("surges set back %d times: %+v, want declined", RevertLimit, el)
	} else if el.Reason != ReasonReplicasReverted {
		t.Errorf("surges set back %d times: reason %q, want %s", RevertLimit, el.Reason, ReasonReplicasReverted)
	}
	if el := (*Reverted)(nil).Eligible(ok); !el.OK {
		t.Errorf("none set back: %+v", el)
	}
}
