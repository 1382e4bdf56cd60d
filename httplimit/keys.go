// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// KeyFunc returns the key a request counts against under one limit, and
// false when the limit does not apply to the request (it carries no API
// key, say). A user KeyFunc might return a JWT subject or a tenant; it must
// be safe for concurrent use.
type KeyFunc func(r *http.Request) (key string, ok bool)

// MaxKeyLen is the longest header value Header uses as a key as it is;
// longer values are replaced by "sha256:" and their hex SHA-256, so a
// client cannot make the store hold arbitrarily long keys.
const MaxKeyLen = 128

// Header returns a KeyFunc that keys a request by the value of the named
// header (an API key, say), trimmed of surrounding whitespace. A request
// without the header, or with an empty one, is not subject to the limit;
// with several lines of it, the first counts.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		vals := r.Header[name]
		if len(vals) == 0 {
			return "", false
		}
		v := strings.TrimSpace(vals[0])
		if v == "" {
			return "", false
		}
		if len(v) > MaxKeyLen {
			sum := sha256.Sum256([]byte(v))
			return "sha256:" + hex.EncodeToString(sum[:]), true
		}
		return v, true
	}
}
