// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxKeyLen is the longest value a front end uses as a key as it is; a
// longer value is replaced by "sha256:" and its hex SHA-256, so a client
// cannot make the store hold arbitrarily long keys.
const MaxKeyLen = 128

// Key turns a value a client sent (a header, a metadata value) into a key:
// trimmed of surrounding whitespace, hashed past MaxKeyLen bytes. ok is
// false for a value that is empty once trimmed.
func Key(v string) (key string, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", false
	}
	if len(v) > MaxKeyLen {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:]), true
	}
	return v, true
}

// Missing says what a limit does with a request its key function has no
// key for (a request without the API key header, say).
type Missing uint8

const (
	// Share, the zero Missing: the request counts under MissingKey, one key
	// shared by every request the limit has no key for. They are limited
	// together, never unlimited.
	Share Missing = iota
	// Reject: the request is refused as malformed (400, InvalidArgument).
	Reject
	// Skip: the limit does not apply to the request.
	Skip
)

// MissingKey is the key of the requests a Share limit has no key for. No
// value Key accepts is empty, so it is no client's key.
const MissingKey = ""

// KeyOf applies m to a key function's answer (key, ok): the key to check
// and whether to check it at all, or reject when the request must be
// refused for having no key.
func KeyOf(key string, ok bool, m Missing) (k string, use, reject bool) {
	switch {
	case ok:
		return key, true, false
	case m == Skip:
		return "", false, false
	case m == Reject:
		return "", false, true
	}
	return MissingKey, true, false
}
