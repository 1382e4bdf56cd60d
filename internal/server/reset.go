package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// generations wraps a Store that cannot delete a key so that a key can be
// reset all the same: a reset gives the (policy, key) pair a new
// generation, appended to the key the wrapped store sees, so the old state
// is no longer read; the store expires it on its own schedule. Reads are
// lock-free (a copy-on-write map); resets, an admin action, take a lock.
// The map holds one entry per key ever reset, in this process only.
type generations struct {
	sluice.Store
	mu  sync.Mutex
	gen atomic.Pointer[map[string]uint64]
}

var _ sluice.Store = (*generations)(nil)
var _ Resetter = (*generations)(nil)

func newGenerations(s sluice.Store) *generations { return &generations{Store: s} }

func genID(p sluice.Policy, key string) string {
	return p.Name + "\x00" + string(p.Algorithm) + "\x00" + key
}

// key returns the key the wrapped store sees.
func (g *generations) key(p sluice.Policy, key string) string {
	m := g.gen.Load()
	if m == nil {
		return key
	}
	n, ok := (*m)[genID(p, key)]
	if !ok {
		return key
	}
	return key + "\x00gen" + strconv.FormatUint(n, 10)
}

// Take implements sluice.Store.
func (g *generations) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	return g.Store.Take(ctx, p, g.key(p, key), cost)
}

// TakeAll implements sluice.Store.
func (g *generations) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if g.gen.Load() != nil {
		mapped := make([]sluice.Request, len(reqs))
		for i, r := range reqs {
			r.Key = g.key(r.Policy, r.Key)
			mapped[i] = r
		}
		reqs = mapped
	}
	return g.Store.TakeAll(ctx, reqs, out)
}

// Reset implements Resetter.
func (g *generations) Reset(ctx context.Context, p sluice.Policy, key string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := map[string]uint64{}
	if m := g.gen.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	next[genID(p, key)]++
	g.gen.Store(&next)
	return nil
}
