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

// TestCancelledNeverAdmitted: a caller whose context has ended is refused
// with its error, even when the key's lease holds units (it was admitted
// from the local block, spending a unit, though every store refuses it).
func TestCancelledNeverAdmitted(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second}
	ls := lease.New(memstore.New())
	defer ls.Close()
	l, err := sluice.NewLimiter(ls, p)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 { // demand enough for a block of several units
		l.Allow(context.Background(), "k")
	}
	if st := ls.Stats(p); st.Taken <= st.Spent {
		t.Fatalf("no unspent units in the lease (%+v): the test needs some", st)
	}
	spent := ls.Stats(p).Spent
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := l.Allow(cancelled, "k")
	if d.Allowed || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Allow with units in the lease: %+v, %v; want refused with context.Canceled", d, err)
	}
	if got := ls.Stats(p).Spent; got != spent {
		t.Errorf("the cancelled Allow spent %d units", got-spent)
	}
}
