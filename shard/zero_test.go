// SPDX-License-Identifier: Apache-2.0

package shard_test

import (
	"testing"

	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/storetest"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Take called the nil count function, Close the nil wrapped
// store), and a Limiter over it refuses, fail-open too.
func TestZeroStore(t *testing.T) {
	storetest.ZeroStore[shard.Store](t, nil)
}
