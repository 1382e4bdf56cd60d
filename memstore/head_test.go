// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"hash/maphash"
	"strings"
	"testing"
	"unsafe"
)

// TestHeadOf checks the key head against its definition: the first
// inlineKey bytes of the key, zero-padded, and ref inlined|len for a key of
// at most inlineKey bytes, else 0; and that is tells apart keys that differ
// in any one byte of the head or in their length.
func TestHeadOf(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for n := 0; n <= 40; n++ {
		key := alphabet[:n]
		k := headOf(key)
		var want [inlineKey]byte
		copy(want[:], key)
		if got := k.bytes(); got != want {
			t.Errorf("headOf(%q).bytes() = %q, want %q", key, got, want)
		}
		wantRef := uint32(0)
		if n <= inlineKey {
			wantRef = inlined | uint32(n)
		}
		if k.ref != wantRef {
			t.Errorf("headOf(%q).ref = %#x, want %#x", key, k.ref, wantRef)
		}
	}

	tab := &table{rs: new(narrowRows), seed: maphash.MakeSeed()}
	keys := []string{"", "a", "a\x00", strings.Repeat("x", 15), strings.Repeat("x", 16), strings.Repeat("x", 17)}
	for i := range inlineKey {
		b := []byte(strings.Repeat("k", inlineKey))
		b[i] = 'K'
		keys = append(keys, string(b))
	}
	for _, key := range keys {
		tab.insert(maphash.String(tab.seed, key), key)
	}
	for i, key := range keys {
		k := headOf(key)
		for e := range keys {
			if got := tab.is(e, &k, key); got != (e == i) {
				t.Errorf("is(entry of %q, %q) = %v", keys[e], key, got)
			}
		}
	}
}

// TestRowSizes: the rows stay as small as their columns allow; a
// sliding-log row is one cache line.
func TestRowSizes(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want uintptr
	}{
		{"narrowRow", unsafe.Sizeof(narrowRow{}), 32},
		{"wideRow", unsafe.Sizeof(wideRow{}), 40},
		{"fixedRow", unsafe.Sizeof(fixedRow{}), 40},
		{"slidingRow", unsafe.Sizeof(slidingRow{}), 48},
		{"logRow", unsafe.Sizeof(logRow{}), 64},
	} {
		if c.size != c.want {
			t.Errorf("%s is %d bytes, want %d", c.name, c.size, c.want)
		}
	}
}
