package main

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice"
)

// memoryStore stands in for memstore until that package lands: the pure
// models over a map, on the replay clock. Replay uses one goroutine, so it
// needs no locking.
type memoryStore struct {
	clock  sluice.Clock
	models map[sluice.Policy]*sluice.Model
	states map[sluice.Policy]map[string]sluice.State
}

func newMemoryStore(c sluice.Clock) *memoryStore {
	return &memoryStore{clock: c, models: make(map[sluice.Policy]*sluice.Model), states: make(map[sluice.Policy]map[string]sluice.State)}
}

func (s *memoryStore) Take(_ context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	m, ok := s.models[p]
	if !ok {
		var err error
		if m, err = sluice.NewModel(p); err != nil {
			return sluice.Decision{}, err
		}
		s.models[p] = m
		s.states[p] = make(map[string]sluice.State)
	}
	st, d := m.Take(s.states[p][key], s.clock.Now().UnixNano(), cost)
	s.states[p][key] = st
	return d, nil
}

func (s *memoryStore) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errors.New("sluice: TakeAll is not supported by the replay store")
}

func (s *memoryStore) Close() error { return nil }
