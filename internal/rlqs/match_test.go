// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"strings"
	"testing"
)

// TestBucketKey: a bucket key names a bucket id injectively, verbatim up
// to maxBucketKey bytes and by the SHA-256 of that past it, so that what
// names a bucket (its part, its division, the division's records in the
// store) is at most 64 bytes whatever its values, and no two buckets share
// a division.
func TestBucketKey(t *testing.T) {
	long := strings.Repeat("x", MaxBucketIDBytes-len("tenant"))
	for _, c := range []struct {
		bucket map[string]string
		want   string // "" for a digest form
	}{
		{map[string]string{"route": "api"}, "5:route3:api"},
		{map[string]string{"b": "2", "a": "1"}, "1:a1:11:b1:2"},
		{map[string]string{"a": "1:b1:2"}, "1:a6:1:b1:2"},
		// 64 bytes verbatim: kept.
		{map[string]string{"user": strings.Repeat("u", 55)}, "4:user55:" + strings.Repeat("u", 55)},
		// 65 bytes verbatim: a digest.
		{map[string]string{"user": strings.Repeat("u", 56)}, ""},
		{map[string]string{"tenant": long}, ""},
	} {
		k := bucketKey(c.bucket)
		switch {
		case c.want != "" && k != c.want:
			t.Errorf("bucketKey(%v) = %q, want %q", c.bucket, k, c.want)
		case c.want == "" && (len(k) != digestKeyLen || k[0] != '#'):
			t.Errorf("bucketKey of %d bytes = %q, want '#' and a SHA-256 (%d bytes)", len(c.bucket["user"]+c.bucket["tenant"]), k, digestKeyLen)
		}
		if len(k) > maxBucketKey {
			t.Errorf("bucketKey is %d bytes, more than %d", len(k), maxBucketKey)
		}
	}
	// Long bucket ids that differ in their last byte, or only in how their
	// bytes are split between entries, are different buckets.
	seen := map[string]string{}
	for _, b := range []map[string]string{
		{"tenant": long},
		{"tenant": long[:len(long)-1] + "y"},
		{"tenant": long[:len(long)-1], "t": "x"},
		{"tenant": long[:len(long)-1] + "x", "t": ""},
		{"tenant" + "x": long[1:]},
	} {
		k := bucketKey(b)
		if k != bucketKey(b) {
			t.Errorf("bucketKey of one bucket id differs between calls")
		}
		if prev, ok := seen[k]; ok {
			t.Errorf("bucket ids %.40q and %.40q share the key %q", prev, b, k)
		}
		seen[k] = strings.Join(func() []string {
			var s []string
			for k, v := range b {
				s = append(s, k+"="+v)
			}
			return s
		}(), ",")
	}
}
