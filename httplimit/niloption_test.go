// SPDX-License-Identifier: Apache-2.0

package httplimit

import "testing"

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1"); w.Code != 200 {
		t.Errorf("no limits: %d, want 200", w.Code)
	}
}
