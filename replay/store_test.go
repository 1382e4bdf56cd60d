// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// modelStore is a minimal sluice.Store for these tests: the pure models over
// maps, on a replay Clock. It does not allocate on an existing key.
type modelStore struct {
	clock  *Clock
	models map[sluice.Policy]*model.Model
	states map[sluice.Policy]map[string]model.State
}

func newModelStore(c *Clock) *modelStore {
	return &modelStore{
		clock:  c,
		models: make(map[sluice.Policy]*model.Model),
		states: make(map[sluice.Policy]map[string]model.State),
	}
}

var _ sluice.Store = (*modelStore)(nil)

func (s *modelStore) Take(_ context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	m, ok := s.models[p]
	if !ok {
		var err error
		if m, err = model.New(p); err != nil {
			return sluice.Decision{}, err
		}
		s.models[p] = m
		s.states[p] = make(map[string]model.State)
	}
	st, d := m.Take(s.states[p][key], s.clock.Now().UnixNano(), cost)
	s.states[p][key] = st
	return d, nil
}

func (s *modelStore) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errors.New("modelStore: TakeAll is not implemented")
}

func (s *modelStore) Reset(context.Context, sluice.Policy, string) error { return nil }

func (s *modelStore) Close() error { return nil }
