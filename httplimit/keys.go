// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"net/http"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/decide"
)

// KeyFunc returns the key a request counts against under one limit, and
// false when the limit does not apply to the request (it carries no API
// key, say). A user KeyFunc might return a JWT subject or a tenant; it must
// be safe for concurrent use.
type KeyFunc func(r *http.Request) (key string, ok bool)

// MaxKeyLen is the longest header value Header uses as a key as it is;
// longer values are replaced by "sha256:" and their hex SHA-256, so a
// client cannot make the store hold arbitrarily long keys.
const MaxKeyLen = decide.MaxKeyLen

// Header returns a KeyFunc that keys a request by the value of the named
// header (an API key, say), trimmed of surrounding whitespace. It reports
// no key for a request without the header, or with an empty one: the
// Limit's Missing then decides (by default such requests share one key);
// with several lines of it, the first counts. An empty name (or one of
// spaces) names no header: New refuses a limit keyed by it.
func Header(name string) KeyFunc {
	if strings.TrimSpace(name) == "" {
		return noHeader
	}
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		vals := r.Header[name]
		if len(vals) == 0 {
			return "", false
		}
		return decide.Key(vals[0])
	}
}

// ClientIP returns a KeyFunc that keys a request by its client's address as
// ip resolves it (the peer, or behind trusted proxies the address they
// pass on), aggregated to ip's prefixes. A nil ip trusts no proxy and uses
// clientip's defaults. A peer that is not an IP address (a Unix socket)
// has no key: the Limit's Missing decides.
func ClientIP(ip *clientip.Resolver) KeyFunc { return ip.Key }

// noHeader is Header's KeyFunc for an empty name, which no request
// carries. New tells it apart (noKey) and refuses it.
func noHeader(*http.Request) (string, bool) { return "", false }

// noKey says why f keys no request, or "" when it may: f is Header's
// function for an empty name. (Only this package's own function is told
// apart, by its code; a KeyFunc is never called to find out.)
func noKey(f KeyFunc) string {
	if f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(noHeader).Pointer() {
		return `Header("") or a name of spaces: no request carries such a header`
	}
	return ""
}
