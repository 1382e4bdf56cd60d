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
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '-', c == '/', c == '@':
			b.WriteByte(c)
		default:
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
		if b.Len() > maxPart {
			sum := sha256.Sum256([]byte(s))
			return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
		}
	}
	return b.String()
}

// policyTag identifies the state a policy uses: policies with the same
// non-empty Name and Algorithm share it; an unnamed policy shares it only
// with identical policies.
func policyTag(p sluice.Policy) string {
	if p.Name != "" {
		return "n:" + escape(p.Name) + ":" + string(p.Algorithm)
	}
	return "u:" + string(p.Algorithm) + ":" + strconv.FormatInt(p.Limit, 10) + ":" +
		strconv.FormatInt(int64(p.Period), 10) + ":" + strconv.FormatInt(p.Burst, 10)
}

// stateKey returns the Redis keys of (policy tag, user key): the state hash
// and the sliding-log list. Both are prefix{tag:escaped key}, the list with
// the suffix "l", so they share one hash slot. With a fixed slot (see
// WithSingleSlot) they are prefix{slot}tag:escaped key instead.
func stateKey(prefix, slot, tag, key string) (state, log string) {
	var s string
	if slot != "" {
		s = prefix + "{" + slot + "}" + tag + ":" + escape(key) + "|"
	} else {
		s = prefix + "{" + tag + ":" + escape(key) + "}"
	}
	return s, s + "l"
}
