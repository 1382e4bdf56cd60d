// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	s := newStore(t, newClient(t, sluicetest.StartRedis(t)), nil)
	defer s.Close()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	if d := take(t, s, p, "k", 1); !d.Allowed {
		t.Errorf("%+v, want admitted", d)
	}
}
