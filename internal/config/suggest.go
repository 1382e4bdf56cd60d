// SPDX-License-Identifier: Apache-2.0

package config

import (
	"sort"
	"strings"
)

// suggest returns the name in known closest to word (a typo of it:
// request_per_unit for requests_per_unit, Burst for burst), or "" when
// none is close. Close is at most one edit for names up to 4 bytes and two
// for longer ones, ignoring case and "-" for "_"; a swap of two
// neighbouring letters is one edit.
func suggest(word string, known []string) string {
	w := normalize(word)
	limit := 1
	if len(w) > 4 {
		limit = 2
	}
	best, bestD := "", limit+1
	sorted := append([]string(nil), known...)
	sort.Strings(sorted) // ties go to the first name, whatever the map order
	for _, k := range sorted {
		if d := editDistance(w, normalize(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func normalize(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours, each 1).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
