package maintenance

import (
	"k8s.io/utils/lru"

	nodemaintv1alpha1 "github.com/nodemaint/nodemaint/api/v1alpha1"
)

// Selectors remembers the parsed node selectors of NodeMaintenances, so that the watches, which
// match every pod event's node against every NodeMaintenance, and the observations, which match
// each node, do not parse them again each time (nodeaffinity's parsing was a few percent of the
// controller's CPU in scenario M of the benchmark). A selector is remembered by the
// NodeMaintenance's UID and generation: its spec changes only with a new generation. Safe for
// concurrent use; the zero value is not usable.
type Selectors struct {
	cache *lru.Cache
}

type parsedSelector struct {
	generation int64
	selector   Selector
}

// NewSelectors remembers the selectors of up to size NodeMaintenances, the least recently used
// forgotten first.
func NewSelectors(size int) *Selectors {
	return &Selectors{cache: lru.New(size)}
}

// Of is NewSelector(nm), parsed once per generation. A NodeMaintenance without a UID or a
// generation (not from the API server) is parsed each time.
func (s *Selectors) Of(nm *nodemaintv1alpha1.NodeMaintenance) Selector {
	if nm.UID == "" || nm.Generation == 0 {
		return NewSelector(nm)
	}
	if v, ok := s.cache.Get(nm.UID); ok {
		if p := v.(parsedSelector); p.generation == nm.Generation {
			return p.selector
		}
	}
	sel := NewSelector(nm)
	s.cache.Add(nm.UID, parsedSelector{generation: nm.Generation, selector: sel})
	return sel
}
