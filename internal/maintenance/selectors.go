package maintenance

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Selectors remembers the parsed node selectors of NodeMaintenances, so that the watches, which
// match every pod event's node against every NodeMaintenance, and the observations, which match
// each node, do not parse them again each time. A selector is remembered by the NodeMaintenance's
// UID and generation (its spec changes only with a new generation) for as long as it is used:
// one not used for a whole period (keep) is forgotten within the next. The reconcilers go over
// every NodeMaintenance in turn, so a cache of a fixed size (an LRU) would forget every selector
// before its next use once there are more maintenances than it holds; this one holds all that are
// in use, and only those. Safe for concurrent use; the zero value is not usable.
type Selectors struct {
	clock clock.PassiveClock
	keep  time.Duration

	mu sync.Mutex
	// current are the selectors used since rotated; previous those used in the period before,
	// moved to current when used again and forgotten at the next rotation otherwise.
	current, previous map[types.UID]parsedSelector
	rotated           time.Time
}

type parsedSelector struct {
	generation int64
	selector   Selector
}

// NewSelectors remembers each selector while it is used at least once every keep.
func NewSelectors(keep time.Duration, clk clock.PassiveClock) *Selectors {
	return &Selectors{clock: clk, keep: keep, current: map[types.UID]parsedSelector{}, rotated: clk.Now()}
}

// Of is NewSelector(nm), parsed once per generation. A NodeMaintenance without a UID or a
// generation (not from the API server) is parsed each time.
func (s *Selectors) Of(nm *nodemaintv1alpha1.NodeMaintenance) Selector {
	if nm.UID == "" || nm.Generation == 0 {
		return NewSelector(nm)
	}
	if sel, ok := s.lookup(nm); ok {
		return sel
	}
	sel := NewSelector(nm)
	s.mu.Lock()
	s.current[nm.UID] = parsedSelector{generation: nm.Generation, selector: sel}
	s.mu.Unlock()
	return sel
}

func (s *Selectors) lookup(nm *nodemaintv1alpha1.NodeMaintenance) (Selector, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.clock.Now(); now.Sub(s.rotated) >= s.keep {
		s.previous, s.current, s.rotated = s.current, map[types.UID]parsedSelector{}, now
	}
	p, ok := s.current[nm.UID]
	if !ok {
		if p, ok = s.previous[nm.UID]; ok {
			s.current[nm.UID] = p
		}
	}
	if !ok || p.generation != nm.Generation {
		return Selector{}, false
	}
	return p.selector, true
}

// Len is how many selectors are remembered.
func (s *Selectors) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.current)
	for uid := range s.previous {
		if _, ok := s.current[uid]; !ok {
			n++
		}
	}
	return n
}
