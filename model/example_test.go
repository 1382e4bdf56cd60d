// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// A model is a pure function of (state, now, cost): here a token bucket of
// 3 refilling one per second, asked four times at t = 0 and once at 1 s.
func Example() {
	m, err := model.New(sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second, Burst: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	var s model.State // the idle state: a full bucket
	now := time.Unix(0, 0).UnixNano()
	for range 4 {
		var d sluice.Decision
		s, d = m.Take(s, now, 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	s, d := m.Take(s, now+int64(time.Second), 1)
	fmt.Println(d.Allowed, d.Remaining, m.ExpiresAt(s) > now)
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 1s
	// true 0 true
}
