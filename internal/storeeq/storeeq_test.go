// SPDX-License-Identifier: Apache-2.0

package storeeq

import "testing"

type val []int // not comparable

type ptr struct{ n int }

// TestSame: equal comparable values are one store; distinct pointers,
// values of other types and values that cannot be compared are not (and
// comparing them does not panic).
func TestSame(t *testing.T) {
	p, q := &ptr{}, &ptr{}
	for _, c := range []struct {
		a, b any
		want bool
	}{
		{p, p, true}, {p, q, false}, {p, nil, false}, {nil, nil, false},
		{val{1}, val{1}, false}, {ptr{1}, ptr{1}, true}, {ptr{1}, &ptr{1}, false},
	} {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%#v, %#v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestNil: nil and a nil pointer are nil; a value or a live pointer is not.
func TestNil(t *testing.T) {
	var np *ptr
	for _, c := range []struct {
		s    any
		want bool
	}{{nil, true}, {np, true}, {&ptr{}, false}, {ptr{}, false}} {
		if got := Nil(c.s); got != c.want {
			t.Errorf("Nil(%#v) = %v, want %v", c.s, got, c.want)
		}
	}
}
