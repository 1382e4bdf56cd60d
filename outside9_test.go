// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOutside9FailedCommitCanBeRetried: Reservation.Commit marks the
// reservation settled before it charges, so a commit whose charge fails
// (here its context had ended: Charge's "may not have been recorded")
// loses the charge for good: the retry answers ErrSettled and charges
// nothing, and the key that used 50 of a budget of 10 keeps admitting.
// README ("Costs known after the response"): the cost "cannot be admitted
// beforehand, and must still count"; serve's /v1/commit was fixed for the
// same loss (CHANGELOG: "the reservation now stays open until a commit
// records every charge"), the library's Reservation was not.
func TestOutside9FailedCommitCanBeRetried(t *testing.T) {
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
}
