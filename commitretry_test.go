// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCommitRetryAfterFailure: a Commit whose charge fails (here its
// context had ended: Charge's "may not have been recorded") leaves the
// reservation open, so the retry records the charge and the key that used
// 50 of a budget of 10 refuses (the retry answered ErrSettled and the key
// kept admitting); a Commit after that answers ErrSettled.
func TestCommitRetryAfterFailure(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, err := sluice.NewLimiter(store, sluice.Policy{Name: "llm", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.Reserve(context.Background(), "tenant", 1)
	if err != nil || !r.Decision.Allowed {
		t.Fatalf("reserve: %+v, %v", r.Decision, err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Commit(gone, 50); err == nil {
		t.Fatal("a commit with an ended context answered no error")
	}
	// The charge was not recorded: a retry must record it.
	if _, err := r.Commit(context.Background(), 50); err != nil {
		t.Errorf("retrying the commit that failed: %v (the charge of 49 over the estimate is lost)", err)
	}
	if d, _ := lim.Allow(context.Background(), "tenant"); d.Allowed {
		t.Errorf("after a reservation that used 50 of a budget of 10 a minute, the next request in the window was admitted: %+v", d)
	}
	if _, err := r.Commit(context.Background(), 50); !errors.Is(err, sluice.ErrSettled) {
		t.Errorf("a third commit: %v, want ErrSettled", err)
	}
}
