package redisstore

import (
	"fmt"
	"net/url"
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
	return o, nil
}

// redact hides the password of a URL for error messages.
func redact(s string) string {
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
