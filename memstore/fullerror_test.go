// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestMaxPoliciesErrorNamesPolicy: the error of a policy refused at the
// bound names the policy as it was given, its parameters included (it
// printed a named policy's identity, "gcra 0/0s burst 0").
func TestMaxPoliciesErrorNamesPolicy(t *testing.T) {
	s := New(WithClock(sluicetest.NewClock(t0)), WithSweepInterval(0), WithMaxPolicies(1))
	defer s.Close()
	ctx := context.Background()
	held := sluice.Policy{Name: "tenant-1", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
	if _, err := s.Take(ctx, held, "k", 1); err != nil {
		t.Fatal(err)
	}
	p := sluice.Policy{Name: "tenant-9", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}
	_, err := s.Take(ctx, p, "k", 1)
	if !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("a second policy of 1: %v, want sluice.ErrStoreFull", err)
	}
	if want := "policy tenant-9: gcra 10/1m0s burst 10: the store holds 1 policies"; !strings.Contains(err.Error(), want) {
		t.Fatalf("the error %q does not name the policy: want %q in it", err, want)
	}
}
