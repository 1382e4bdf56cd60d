// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// unescape inverts escape on its unhashed form.
func unescape(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			t.Fatalf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String()
}

func fuzzPolicy(name string, alg uint8, limit int64) sluice.Policy {
	return sluice.Policy{Name: name, Algorithm: sluice.Algorithms()[int(alg)%len(sluice.Algorithms())], Limit: limit, Period: time.Second}
}

// FuzzKey checks the key builder: every key has exactly one hash tag, which
// the state hash and the sliding-log list share; keys are bounded in length;
// and distinct (policy identity, key) pairs never get the same key.
func FuzzKey(f *testing.F) {
	f.Add("", uint8(0), int64(1), "k", "", uint8(0), int64(1), "k", "")
	f.Add("api", uint8(1), int64(5), "a{b}c", "api", uint8(1), int64(6), "a{b}c", "slot")
	f.Add("a:b", uint8(2), int64(5), "c", "a", uint8(2), int64(5), "b:c", "")
	f.Add("", uint8(3), int64(5), "%41", "", uint8(3), int64(5), "A", "")
	f.Add("n", uint8(4), int64(5), strings.Repeat("x", 200), "n", uint8(4), int64(5), strings.Repeat("x", 201), "")
	f.Add("n", uint8(5), int64(5), strings.Repeat("{", 50), "n", uint8(5), int64(5), "#", "")
	f.Fuzz(func(t *testing.T, name1 string, alg1 uint8, limit1 int64, key1, name2 string, alg2 uint8, limit2 int64, key2, slot string) {
		if strings.ContainsAny(slot, "{}") {
			return
		}
		p1, p2 := fuzzPolicy(name1, alg1, limit1), fuzzPolicy(name2, alg2, limit2)
		st1, lg1 := stateKey("pre:", slot, policyTag(p1), key1)
		if wst, wlg := stateKeyRef("pre:", slot, policyTag(p1), key1); st1 != wst || lg1 != wlg {
			t.Fatalf("stateKey(%q, %q) = %q, %q; want %q, %q", slot, key1, st1, lg1, wst, wlg)
		}
		st2, lg2 := stateKey("pre:", slot, policyTag(p2), key2)
		for _, k := range []string{st1, lg1, st2, lg2} {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || strings.Index(k, "{") > strings.Index(k, "}") {
				t.Fatalf("key %q does not have exactly one hash tag", k)
			}
			if len(k) > len("pre:")+len(slot)+MaxKeyLen {
				t.Fatalf("key %q is %d bytes long", k, len(k))
			}
		}
		if keySlot(st1) != keySlot(lg1) {
			t.Fatalf("%q and %q are in different slots", st1, lg1)
		}
		if slot != "" && keySlot(st1) != keySlot(st2) {
			t.Fatalf("with a single slot, %q and %q are in different slots", st1, st2)
		}
		same := sameIdentity(p1, p2) && key1 == key2
		if (st1 == st2) != same || (lg1 == lg2) != same {
			t.Fatalf("%v %q -> %q and %v %q -> %q", p1, key1, st1, p2, key2, st2)
		}
		if st1 == lg2 || st2 == lg1 {
			t.Fatalf("a state key equals a log key: %q %q %q %q", st1, lg1, st2, lg2)
		}
		if e := escape(key1); !strings.HasPrefix(e, "#") {
			if got := unescape(t, e); got != key1 {
				t.Fatalf("escape(%q) = %q does not decode back (%q)", key1, e, got)
			}
		} else if len(key1)*3 <= maxPart && len(key1) <= maxPart/3 {
			t.Fatalf("a short key %q was hashed", key1)
		}
	})
}

// escapeRef and stateKeyRef are escape and stateKey written plainly, the
// way they were before they were made to allocate less.
func escapeRef(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '-', c == '/', c == '@':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
		if b.Len() > maxPart {
			sum := sha256.Sum256([]byte(s))
			return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
		}
	}
	return b.String()
}

func stateKeyRef(prefix, slot, tag, key string) (state, log string) {
	s := prefix + "{" + tag + ":" + escapeRef(key) + "}"
	if slot != "" {
		s = prefix + "{" + slot + "}" + tag + ":" + escapeRef(key) + "|"
	}
	return s, s + "l"
}

func TestStateKeyReference(t *testing.T) {
	for _, key := range []string{"", "k", "a{b}c", "%41", "é", "#", strings.Repeat("x", 128), strings.Repeat("x", 129),
		strings.Repeat("{", 42), strings.Repeat("{", 43), strings.Repeat("a", 126) + "é"} {
		for _, slot := range []string{"", "s"} {
			st, lg := stateKey("pre:", slot, "u:gcra:1:2:3", key)
			if wst, wlg := stateKeyRef("pre:", slot, "u:gcra:1:2:3", key); st != wst || lg != wlg {
				t.Errorf("stateKey(%q, %q) = %q, %q; want %q, %q", slot, key, st, lg, wst, wlg)
			}
			if e := escape(key); e != escapeRef(key) {
				t.Errorf("escape(%q) = %q, want %q", key, e, escapeRef(key))
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { stateKey("sluice:", "", "u:gcra:100:1000000000:0", "0123456789abcdef") }); n != 1 {
		t.Errorf("stateKey: %v allocations, want 1", n)
	}
}

// sameIdentity reports whether a store keeps one state for p and q.
func sameIdentity(p, q sluice.Policy) bool {
	if p.Name != "" || q.Name != "" {
		return p.Name == q.Name && p.Algorithm == q.Algorithm
	}
	return p == q
}

func TestKeyLength(t *testing.T) {
	long := strings.Repeat("é", 1000)
	p := sluice.Policy{Name: long, Algorithm: sluice.SlidingWindow, Limit: sluice.MaxLimit, Period: sluice.MaxPeriod}
	st, lg := stateKey("", "", policyTag(p), long)
	if len(st) > MaxKeyLen || len(lg) > MaxKeyLen {
		t.Fatalf("keys of %d and %d bytes, bound %d", len(st), len(lg), MaxKeyLen)
	}
	q := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: sluice.MaxLimit, Period: sluice.MaxPeriod, Burst: sluice.MaxLimit}
	if st, _ := stateKey("", "", policyTag(q), long); len(st) > MaxKeyLen {
		t.Fatalf("key of %d bytes, bound %d", len(st), MaxKeyLen)
	}
	if a, b := escape(strings.Repeat("a", 129)), escape(strings.Repeat("a", 130)); a == b || !strings.HasPrefix(a, "#") {
		t.Fatalf("long keys: %q %q", a, b)
	}
}
