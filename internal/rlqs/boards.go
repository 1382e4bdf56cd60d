// SPDX-License-Identifier: Apache-2.0

package rlqs

import "github.com/sluicehq/sluice"

// BoardFor returns the board that shares divisions through store across
// replicas, or nil when store cannot (memory: NewMemoryBoard, one replica).
func BoardFor(store sluice.Store) Board {
	return nil
}
