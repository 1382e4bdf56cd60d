// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestShares: claims are made in order, each clamped to the budget less the
// others' grants; records expire at their TTL on the callers' clock; a
// dropped record frees its grant at once.
func TestShares(t *testing.T) {
	s := newStore(t, newClient(t, sluicetest.StartRedis(t)))
	ctx := t.Context()
	t0 := time.Unix(1_700_000_000, 0)
	const div = "edge.route_api\x00{odd: name}"
	claim := func(now time.Time, cs ...ShareClaim) []int64 {
		t.Helper()
		g, err := s.ClaimShares(ctx, div, 100, now, 10*time.Second, cs)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := claim(t0, ShareClaim{"a", -1, 80}, ShareClaim{"b", 20.5, 50}); !slices.Equal(g, []int64{80, 20}) {
		t.Fatalf("grants %v, want [80 20]: b gets what a leaves", g)
	}
	// c arrives: nothing is left until a gives some up, in the same call.
	if g := claim(t0.Add(time.Second), ShareClaim{"c", -1, 30}); !slices.Equal(g, []int64{0}) {
		t.Fatalf("grants %v, want [0]", g)
	}
	if g := claim(t0.Add(time.Second), ShareClaim{"a", 3, 50}, ShareClaim{"c", -1, 30}); !slices.Equal(g, []int64{50, 30}) {
		t.Fatalf("grants %v, want [50 30]", g)
	}
	sh, err := s.Shares(ctx, div, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(sh, func(x, y Share) int { return cmpString(x.Member, y.Member) })
	want := []Share{{"a", 3, 50}, {"b", 20.5, 20}, {"c", -1, 30}}
	if !slices.Equal(sh, want) {
		t.Fatalf("shares %v, want %v", sh, want)
	}
	// b's record (claimed at t0) expires at t0+10s; the others live on.
	sh, err = s.Shares(ctx, div, t0.Add(10*time.Second))
	if err != nil || len(sh) != 2 {
		t.Fatalf("shares at t0+10s: %v, %v; want a and c", sh, err)
	}
	// a's record (last claimed at t0+1s) expires at t0+11s: a drop of
	// records expiring by t0+10s (claimed by t0) keeps it; one by t0+11s
	// drops it.
	if err := s.DropShare(ctx, div, "a", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if sh, err := s.Shares(ctx, div, t0.Add(10*time.Second)); err != nil || len(sh) != 2 {
		t.Fatalf("shares after a drop of records claimed by t0: %v, %v; want a and c still", sh, err)
	}
	if err := s.DropShare(ctx, div, "a", t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	if g := claim(t0.Add(10*time.Second), ShareClaim{"c", 90, 100}); !slices.Equal(g, []int64{100}) {
		t.Fatalf("grants %v, want [100] once a and b are gone", g)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestSharesKey(t *testing.T) {
	if got := sharesKey("sl:", "", "edge.x"); got != "sl:{q:edge.x}" {
		t.Errorf("sharesKey = %q", got)
	}
	if got := sharesKey("sl:", "s", "edge.x"); got != "sl:{s}q:edge.x" {
		t.Errorf("sharesKey with a slot = %q", got)
	}
}
