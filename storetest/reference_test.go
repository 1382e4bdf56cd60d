// SPDX-License-Identifier: Apache-2.0

package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// reference is a store that is obviously correct: one mutex, one map, the
// models, and states dropped at the instant they expire. It shows that the
// suite can be passed.
type reference struct {
	clock clock.Clock

	mu     sync.Mutex
	states map[refKey]refEntry
	closed bool
}

var _ sluice.Store = (*reference)(nil)

type refKey struct {
	policy sluice.Policy // the policy's identity: see sluice.Policy
	key    string
}

type refEntry struct {
	state   model.State
	expires int64
}

func newReference(clock clock.Clock) *reference {
	return &reference{clock: clock, states: map[refKey]refEntry{}}
}

func refKeyOf(p sluice.Policy, key string) refKey {
	if p.Name != "" {
		p = sluice.Policy{Name: p.Name, Algorithm: p.Algorithm}
	}
	return refKey{p, key}
}

// get returns the live state of k at now (a copy the caller may change).
func (s *reference) get(k refKey, now int64) model.State {
	e, ok := s.states[k]
	if !ok {
		return model.State{}
	}
	if now >= e.expires {
		delete(s.states, k)
		return model.State{}
	}
	e.state.Log = slices.Clone(e.state.Log)
	return e.state
}

func (s *reference) put(k refKey, m *model.Model, st model.State) {
	if exp := m.ExpiresAt(st); exp > s.clock.Now().UnixNano() {
		s.states[k] = refEntry{st, exp}
	} else {
		delete(s.states, k)
	}
}

func (s *reference) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	out := make([]sluice.Decision, 1)
	err := s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: key, Cost: cost}}, out)
	return out[0], err
}

func (s *reference) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if len(out) != len(reqs) {
		return fmt.Errorf("reference: %d requests but room for %d decisions", len(reqs), len(out))
	}
	models := make([]*model.Model, len(reqs))
	for i, q := range reqs {
		if q.Cost < 0 {
			return errors.New("reference: negative cost")
		}
		m, err := model.New(q.Policy)
		if err != nil {
			return err
		}
		models[i] = m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("reference: %w", sluice.ErrStoreClosed)
	}
	now := s.clock.Now().UnixNano()
	tentative := map[refKey]model.State{}
	admitted := true
	for i, q := range reqs {
		k := refKeyOf(q.Policy, q.Key)
		st, ok := tentative[k]
		if !ok {
			st = s.get(k, now)
		}
		if q.Force {
			tentative[k], out[i] = models[i].Charge(st, now, q.Cost)
			continue
		}
		tentative[k], out[i] = models[i].Take(st, now, q.Cost)
		admitted = admitted && out[i].Allowed
	}
	if !admitted {
		for i, q := range reqs {
			if out[i].Allowed || q.Force {
				_, out[i] = models[i].Take(s.get(refKeyOf(q.Policy, q.Key), now), now, 0)
			}
		}
		return nil
	}
	for i, q := range reqs {
		k := refKeyOf(q.Policy, q.Key)
		s.put(k, models[i], tentative[k])
	}
	return nil
}

// Len drops the expired states and returns how many are left.
func (s *reference) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now().UnixNano()
	for k, e := range s.states {
		if now >= e.expires {
			delete(s.states, k)
		}
	}
	return len(s.states)
}

func TestReference(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := newReference(clock)
		return storetest.Harness{Store: s, Clock: clock, Len: s.Len}
	})
}

func (s *reference) Reset(_ context.Context, p sluice.Policy, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sluice.ErrStoreClosed
	}
	delete(s.states, refKeyOf(p, key))
	return nil
}

func (s *reference) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
