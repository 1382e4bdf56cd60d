package redisstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url   string
		addrs []string
		tls   bool
		pass  string
		db    int
	}{
		{"redis://h:1", []string{"h:1"}, false, "", 0},
		{"redis://u:pw@h:1/2", []string{"h:1"}, false, "pw", 2},
		{"rediss://h:1", []string{"h:1"}, true, "", 0},
		{"redis://h:1?addr=g:2&addr=f:3", []string{"h:1", "g:2", "f:3"}, false, "", 0},
		{"redis+cluster://h:1,g:2,f:3", []string{"h:1", "g:2", "f:3"}, false, "", 0},
		{"rediss+cluster://:pw@h:1,g:2?skip_verify=true", []string{"h:1", "g:2"}, true, "pw", 0},
	} {
		o, err := parseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if !slices.Equal(o.InitAddress, c.addrs) || (o.TLSConfig != nil) != c.tls || o.Password != c.pass || o.SelectDB != c.db {
			t.Fatalf("%s: addresses %v TLS %v password %q db %d", c.url, o.InitAddress, o.TLSConfig != nil, o.Password, o.SelectDB)
		}
	}
	for _, bad := range []string{"h:1", "http://h:1", "redis+cluster://h:1,,g:2", "redis://u:secret@h:1/notadb"} {
		_, err := parseURL(bad)
		if err == nil {
			t.Fatalf("%s: no error", bad)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("%s: the error shows the password: %v", bad, err)
		}
	}
}

func TestOpen(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	for _, url := range []string{
		"redis://" + sluicetest.StartRedis(t) + "/3",
		"redis+cluster://" + strings.Join(sluicetest.StartRedisCluster(t, 3), ","),
	} {
		s, err := Open(url, WithTimeout(time.Second))
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		for i, want := range []bool{true, true, false} {
			if d := take(t, s, p, "k", 1); d.Allowed != want {
				t.Fatalf("%s: request %d: %+v", url, i, d)
			}
		}
		if strings.HasPrefix(url, "redis+cluster") != s.cluster {
			t.Fatalf("%s: cluster mode %v", url, s.cluster)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open("redis://127.0.0.1:1"); err == nil {
		t.Fatal("Open of a closed port returned no error")
	}
}
