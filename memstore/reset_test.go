// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

func TestReset(t *testing.T) {
	s := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}
	other := sluice.Policy{Name: "q", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}
	for _, k := range []string{"a", "b"} {
		for i := 0; i < 2; i++ {
			if _, err := s.Take(ctx, p, k, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Take(ctx, other, "a", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, p, "a"); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Take(ctx, p, "a", 0); d.Remaining != 2 {
		t.Errorf("a after reset: remaining %d, want 2", d.Remaining)
	}
	if d, _ := s.Take(ctx, p, "b", 0); d.Remaining != 0 {
		t.Errorf("b (not reset): remaining %d, want 0", d.Remaining)
	}
	if d, _ := s.Take(ctx, other, "a", 0); d.Remaining != 0 {
		t.Errorf("a under another policy: remaining %d, want 0", d.Remaining)
	}
	if n := s.Len(); n != 2 {
		t.Errorf("Len after reset = %d, want 2", n)
	}
	if err := s.Reset(ctx, p, "never-seen"); err != nil {
		t.Errorf("reset of an unknown key: %v", err)
	}
	if err := s.Reset(ctx, sluice.Policy{Algorithm: "nope"}, "a"); err == nil {
		t.Error("reset under an invalid policy: no error")
	}
}
