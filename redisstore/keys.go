// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// maxPart is the longest escaped key or policy name written into a Redis key
// as is; a longer one is replaced by a hash of it.
const maxPart = 128

// MaxKeyLen bounds the length of every Redis key the store writes, beyond
// the length of the configured prefix.
const MaxKeyLen = 2*maxPart + 96

// escape makes s safe inside a hash tag and injective: bytes other than
// ASCII letters, digits and . _ - / @ are written %XX. If the result is
// longer than maxPart, it is replaced by "#" and the URL-safe base64 of
// SHA-256(s) ('#' is always escaped, so the two forms cannot meet).
func escape(s string) string {
	n, hashed := escapedLen(s)
	var b strings.Builder
	b.Grow(n)
	writeEscaped(&b, s, hashed)
	return b.String()
}

// hashedLen is the length of the hashed form of escape.
const hashedLen = 1 + 43 // "#", base64 (unpadded) of 32 bytes

// plain reports whether escape writes c as is.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '/' || c == '@'
}

// escapedLen returns the length of escape(s) and whether it is the hashed
// form.
func escapedLen(s string) (n int, hashed bool) {
	for i := 0; i < len(s); i++ {
		if plain(s[i]) {
			n++
		} else {
			n += 3
		}
		if n > maxPart {
			return hashedLen, true
		}
	}
	return n, false
}

// writeEscaped writes escape(s) to b; hashed is escapedLen's answer.
func writeEscaped(b *strings.Builder, s string, hashed bool) {
	if hashed {
		sum := sha256.Sum256([]byte(s))
		var enc [hashedLen - 1]byte
		base64.RawURLEncoding.Encode(enc[:], sum[:])
		b.WriteByte('#')
		b.Write(enc[:])
		return
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// policyTag identifies the state a policy uses: policies with the same
// non-empty Name and Algorithm share it; an unnamed policy shares it only
// with identical policies.
func policyTag(p sluice.Policy) string {
	if p.Name != "" {
		return "n:" + escape(p.Name) + ":" + layout(p.Algorithm)
	}
	return "u:" + layout(p.Algorithm) + ":" + strconv.FormatInt(p.Limit, 10) + ":" +
		strconv.FormatInt(int64(p.Period), 10) + ":" + strconv.FormatInt(p.Burst, 10) + calendarTag(p.Calendar)
}

// layout names an algorithm's state layout in its keys: the algorithm, and
// ".2" for the second layout of fixed-window (a field per window,
// fixed.lua) and of the bucket kinds (a field per epoch, bucket.lua), so
// that a process of an earlier version, which reads fields t, c, f and d,
// never reads or writes the same key.
func layout(a sluice.Algorithm) string {
	switch a {
	case sluice.FixedWindow, sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
		return string(a) + ".2"
	}
	return string(a)
}

// stateKey returns the Redis keys of (policy tag, user key): the state hash
// and the sliding-log list. Both are prefix{tag:escaped key}, the list with
// the suffix "l", so they share one hash slot. With a fixed slot (see
// WithSingleSlot) they are prefix{slot}tag:escaped key instead.
func stateKey(prefix, slot, tag, key string) (state, log string) {
	// One allocation for both: the log key is the state key and "l".
	n, hashed := escapedLen(key)
	var b strings.Builder
	b.Grow(len(prefix) + len(slot) + len(tag) + n + 5)
	b.WriteString(prefix)
	b.WriteByte('{')
	if slot != "" {
		b.WriteString(slot)
		b.WriteByte('}')
	}
	b.WriteString(tag)
	b.WriteByte(':')
	writeEscaped(&b, key, hashed)
	if slot != "" {
		b.WriteByte('|')
	} else {
		b.WriteByte('}')
	}
	b.WriteByte('l')
	log = b.String()
	return log[:len(log)-1], log
}
