// SPDX-License-Identifier: Apache-2.0

// Package storeeq tells whether two store values are provably one store,
// for the root package's AllowAll and binding and for the front ends'
// check that a route's limits share one.
package storeeq

import "reflect"

// Same reports whether a and b are provably one store: equal values of a
// comparable dynamic type (reflect.Value.Comparable also looks inside
// interface fields, so == cannot panic).
func Same(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.IsValid() && vb.IsValid() && va.Type() == vb.Type() && va.Comparable() && vb.Comparable() && a == b
}

// Nil reports whether s is nil, or a nil pointer (a *memstore.Store left
// nil, say), whose methods would panic.
func Nil(s any) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
