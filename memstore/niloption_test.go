// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	if d, err := s.Take(context.Background(), p, "k", 1); err != nil || !d.Allowed {
		t.Errorf("%+v %v, want admitted", d, err)
	}
}
