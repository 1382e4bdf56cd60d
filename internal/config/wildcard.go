// SPDX-License-Identifier: Apache-2.0

package config

import "strings"

// A wildcard is a configured descriptor value holding one or more "*": each
// "*" stands for any run of characters, the empty run included, so "foo*"
// is every value that starts with "foo", "bar*b" every value that starts
// with "bar" and ends with "b" (at least "barb"), and "svc*ep*rpc" every
// value with "svc", then "ep", then "rpc" in that order at the start, the
// middle and the end. There is no escape: a "*" in a configured value is
// always a wildcard, as in envoyproxy/ratelimit.
type wildcard struct {
	key     string
	pattern string   // as configured
	parts   []string // pattern split at each "*": len(parts) >= 2
	next    *node
}

func newWildcard(key, pattern string, next *node) wildcard {
	return wildcard{key: key, pattern: pattern, parts: strings.Split(pattern, "*"), next: next}
}

// isWildcard reports whether a configured value is a wildcard.
func isWildcard(value string) bool { return strings.Contains(value, "*") }

// matchWildcard reports whether value matches pattern split at its "*"s
// (parts, at least two). The first part must start the value, the last end
// it, and the middle ones occur in order in between, without overlapping.
// Taking each middle part at its leftmost place is enough: a later place
// leaves less room, never more, for the parts after it. Time is
// O(len(value)·len(parts)) at worst, with no backtracking.
func matchWildcard(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// MatchValue reports whether a request value matches a configured value
// the way descriptors match: a configured value with "*" is a wildcard
// (see the package documentation), "" matches any value, and any other
// value matches only itself.
func MatchValue(configured, value string) bool {
	switch {
	case configured == "":
		return true
	case isWildcard(configured):
		return matchWildcard(strings.Split(configured, "*"), value)
	}
	return configured == value
}
