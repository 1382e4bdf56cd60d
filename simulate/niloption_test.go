// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestNilOption: a nil Option is no option (Run panicked on it).
func TestNilOption(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	r, err := Run(context.Background(), p, []Request{{Key: "k", Cost: 1}, {Key: "k", Cost: 1}}, nil)
	if err != nil || r == nil {
		t.Fatalf("Run with a nil Option: %v", err)
	}
}
