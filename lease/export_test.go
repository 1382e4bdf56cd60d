// SPDX-License-Identifier: Apache-2.0

package lease

// Tables returns how many lease tables s holds, and the bound on them.
func Tables(s *Store) (n, most int) {
	s.tables.Range(func(any, any) bool { n++; return true })
	return n, maxTables
}
