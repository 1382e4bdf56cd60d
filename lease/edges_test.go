// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
)

// TestNilArguments: a nil Option is no option (it panicked), and a lease
// store over a nil store refuses with an error instead of panicking.
func TestNilArguments(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	inner := memstore.New()
	ls := lease.New(inner, nil)
	defer ls.Close()
	if d, err := ls.Take(context.Background(), p, "k", 1); err != nil || !d.Allowed {
		t.Errorf("with a nil Option: %+v %v, want admitted", d, err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("a lease store over a nil store panicked: %v", r)
			}
		}()
		ns := lease.New(nil)
		if d, err := ns.Take(context.Background(), p, "k", 1); !errors.Is(err, sluice.ErrStoreClosed) || d.Allowed {
			t.Errorf("over a nil store: %+v %v, want refused with an error", d, err)
		}
	}()
}
