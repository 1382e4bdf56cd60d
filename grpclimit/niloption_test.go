// SPDX-License-Identifier: Apache-2.0

package grpclimit

import "testing"

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	if _, err := New(nil); err != nil {
		t.Fatal(err)
	}
}
