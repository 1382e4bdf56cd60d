// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"sort"
)

// Option configures how a configuration loads.
type Option func(*options)

type options struct {
	mergeDomains bool
}

// WithMergeDomains lets several files define descriptors of one domain, as
// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does: each file's top-level
// descriptors join the domain's, in file-name order. A top-level
// descriptor whose key and value (wildcards compared as written) another
// file already put at the top of that domain is an error naming both; the
// trees are not merged deeper. Without this option a domain defined in two
// files is an error.
func WithMergeDomains() Option { return func(o *options) { o.mergeDomains = true } }

// mergeDomain moves src's top-level descriptors into dst, the domain's
// tree so far, and returns an error for each that dst already has.
func mergeDomain(dst, src *node, domain string) []error {
	var dups []*node
	clash := func(n, prev *node) {
		n.field = fmt.Sprintf("%s: duplicate descriptor: domain %q is merged from several files and %s:%d (%s) already defines it", n.field, domain, prev.file, prev.line, prev.field)
		dups = append(dups, n)
	}
	for k, n := range src.exact {
		if prev := dst.exact[k]; prev != nil {
			clash(n, prev)
		}
	}
	for k, n := range src.keyOnly {
		if prev := dst.keyOnly[k]; prev != nil {
			clash(n, prev)
		}
	}
	for _, w := range src.wildcards {
		for _, d := range dst.wildcards {
			if d.key == w.key && d.pattern == w.pattern {
				clash(w.next, d.next)
			}
		}
	}
	if len(dups) > 0 {
		sort.Slice(dups, func(i, j int) bool { return dups[i].line < dups[j].line })
		errs := make([]error, len(dups))
		for i, n := range dups {
			errs[i] = fmt.Errorf("%s:%d: %s", n.file, n.line, n.field)
		}
		return errs
	}
	for k, n := range src.exact {
		dst.exact[k] = n
	}
	for k, n := range src.keyOnly {
		dst.keyOnly[k] = n
	}
	dst.wildcards = append(dst.wildcards, src.wildcards...)
	return nil
}
