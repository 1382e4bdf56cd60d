// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"testing"

	"github.com/sluicehq/sluice/inflight"
)

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	if _, err := inflight.New(failing{}, "api", 5, nil); err != nil {
		t.Fatal(err)
	}
}
