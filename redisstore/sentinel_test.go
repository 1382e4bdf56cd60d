package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestSentinel: Open of a Sentinel URL (redis://sentinel?master_set=M) makes
// decisions, and they land on the master that the sentinel names; a master
// name the sentinel does not know makes Take fail.
func TestSentinel(t *testing.T) {
	master, sentinel := sluicetest.StartRedisSentinel(t)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	s, err := Open("redis://"+sentinel+"?master_set="+sluicetest.SentinelMaster, WithTimeout(time.Second), WithPrefix("sentinel:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, want := range []bool{true, true, false} {
		if d := take(t, s, p, "k", 1); d.Allowed != want {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if got := s.conn.Load().client.Mode(); got != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want sentinel", got)
	}
	// The state is on the master.
	c := newClient(t, master)
	keys, err := c.Do(t.Context(), c.B().Keys().Pattern("sentinel:*").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys on the master %s: %q %v", master, keys, err)
	}

	bad, err := Open("redis://"+sentinel+"?master_set=nosuchmaster", WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	start := time.Now()
	d, err := bad.Take(t.Context(), p, "k", 1)
	if err == nil {
		t.Fatalf("an unknown master set: no error: %+v", d)
	}
	if !strings.Contains(err.Error(), "No such master") {
		t.Fatalf("an unknown master set: %v, want the sentinel's \"No such master\"", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("an unknown master set: Take took %v", el)
	}
}
