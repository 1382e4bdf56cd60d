// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

func TestReset(t *testing.T) {
	s, err := redisstore.Open("redis://" + sluicetest.StartRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, alg := range sluice.Algorithms() {
		p := sluice.Policy{Name: "p", Algorithm: alg, Limit: 2, Period: time.Hour}
		for _, k := range []string{"a", "b"} {
			for i := 0; i < 2; i++ {
				if _, err := s.Take(ctx, p, k, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Reset(ctx, p, "a"); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Take(ctx, p, "a", 0); err != nil || d.Remaining != 2 {
			t.Errorf("%s: a after reset: %+v, %v; want 2 remaining", alg, d, err)
		}
		if d, err := s.Take(ctx, p, "b", 0); err != nil || d.Remaining != 0 {
			t.Errorf("%s: b (not reset): %+v, %v; want 0 remaining", alg, d, err)
		}
	}
	if err := s.Reset(ctx, sluice.Policy{Algorithm: "nope"}, "a"); err == nil {
		t.Error("reset under an invalid policy: no error")
	}
}
