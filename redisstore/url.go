// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/redis/rueidis"
)

// parseURL turns a store URL (see Open) into client options.
func parseURL(s string) (rueidis.ClientOption, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return rueidis.ClientOption{}, fmt.Errorf("store URL %s: want redis://, rediss://, redis+cluster:// or rediss+cluster://", redact(s))
	}
	switch scheme {
	case "redis", "rediss":
	case "redis+cluster", "rediss+cluster":
		// host1:port1,host2:port2[/db][?query] → the first seed plus addr=
		// for each other one.
		auth, hosts := "", rest
		if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
			auth, hosts = hosts[:i+1], hosts[i+1:]
		}
		tail := ""
		if i := strings.IndexAny(hosts, "/?"); i >= 0 {
			hosts, tail = hosts[:i], hosts[i:]
		}
		seeds := strings.Split(hosts, ",")
		var extra []string
		for _, h := range seeds[1:] {
			if h == "" {
				return rueidis.ClientOption{}, fmt.Errorf("store URL %s: an empty host in the seed list", redact(s))
			}
			extra = append(extra, "addr="+url.QueryEscape(h))
		}
		scheme = strings.TrimSuffix(scheme, "+cluster")
		rest = auth + seeds[0] + tail
		if len(extra) > 0 {
			sep := "?"
			if strings.Contains(tail, "?") {
				sep = "&"
			}
			rest += sep + strings.Join(extra, "&")
		}
	default:
		return rueidis.ClientOption{}, fmt.Errorf("store URL %s: unknown scheme %q (want redis, rediss, redis+cluster or rediss+cluster)", redact(s), scheme)
	}
	o, err := rueidis.ParseURL(scheme + "://" + rest)
	if err != nil {
		return o, fmt.Errorf("store URL %s: %w", redact(s), err)
	}
	// Sentinel: the sentinels' own credentials (sentinel requirepass) are
	// separate from the master's, and rediss:// means TLS to the
	// sentinels as well as to the master.
	q, err := url.ParseQuery(query(rest))
	if err != nil {
		return o, fmt.Errorf("store URL %s: %w", redact(s), err)
	}
	if o.Sentinel.MasterSet == "" {
		for _, k := range []string{"sentinel_username", "sentinel_password"} {
			if q.Has(k) {
				return o, fmt.Errorf("store URL %s: %s is for Sentinel and needs master_set", redact(s), k)
			}
		}
		return o, nil
	}
	o.Sentinel.Username = q.Get("sentinel_username")
	o.Sentinel.Password = q.Get("sentinel_password")
	if o.TLSConfig != nil {
		o.Sentinel.TLSConfig = o.TLSConfig.Clone()
	}
	return o, nil
}

// query returns the query part of a URL without its scheme.
func query(rest string) string {
	_, q, _ := strings.Cut(rest, "?")
	return q
}

// sentinelPassword matches the value of a sentinel_password parameter.
var sentinelPassword = regexp.MustCompile(`([?&]sentinel_password=)[^&]*`)

// redact hides the passwords of a URL for error messages.
func redact(s string) string {
	s = sentinelPassword.ReplaceAllString(s, "${1}xxxxx")
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	i := strings.LastIndexByte(rest, '@')
	if i < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:i], ":")
	if !hasPass {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[i:]
}
