// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestAuth: Open with a password (requirepass) and with an ACL user makes
// decisions; a wrong or missing password, or an unknown user, makes Take
// fail with an error that shows no password.
func TestAuth(t *testing.T) {
	pass, userPass := "pw-"+rand.Text(), "upw-"+rand.Text()
	addr := sluicetest.StartRedisArgs(t, func(int) []string {
		return []string{"--requirepass", pass, "--user", "alice", "on", ">" + userPass, "~*", "&*", "+@all"}
	})
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	for i, url := range []string{
		"redis://:" + pass + "@" + addr,
		"redis://default:" + pass + "@" + addr + "/1",
		"redis://alice:" + userPass + "@" + addr + "/2",
	} {
		s, err := Open(url)
		if err != nil {
			t.Fatalf("url %d: Open: %v", i, err)
		}
		for j, want := range []bool{true, true, false} {
			d, err := s.Take(t.Context(), p, "k", 1)
			if err != nil || d.Allowed != want {
				t.Fatalf("url %d: request %d: %+v %v", i, j, d, err)
			}
		}
		s.Close()
	}
	for i, url := range []string{
		"redis://:wrong-" + pass + "@" + addr,
		"redis://alice:" + pass + "@" + addr,
		"redis://bob:" + userPass + "@" + addr,
		"redis://" + addr,
	} {
		s, err := Open(url)
		if err != nil {
			t.Fatalf("bad url %d: Open: %v", i, err)
		}
		for j := range 2 { // connecting, then the breaker's stored error
			d, err := s.Take(t.Context(), p, "k", 1)
			if err == nil {
				t.Fatalf("bad url %d: request %d: no error: %+v", i, j, d)
			}
			if msg := err.Error(); strings.Contains(msg, pass) || strings.Contains(msg, userPass) {
				t.Fatalf("bad url %d: request %d: the error shows a password: %v", i, j, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "WRONGPASS") && !strings.Contains(msg, "NOAUTH") {
				t.Fatalf("bad url %d: request %d: want an authentication error, got %v", i, j, err)
			}
		}
		s.Close()
	}
}
