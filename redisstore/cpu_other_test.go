// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package redisstore

import "time"

// processCPU returns 0: the benchmarks report no client CPU time here.
func processCPU() time.Duration { return 0 }
