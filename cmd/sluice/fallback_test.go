// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

// TestServeReplicasFlag: --replicas fixes the count (sluice_replicas); on
// the memory store, which never fails, the count is 1.
func TestServeReplicasFlag(t *testing.T) {
	if n := metricSum(t, startServe(t, serveOptions{}).httpAddr, "sluice_replicas"); n != 1 {
		t.Errorf("memory store: sluice_replicas %v, want 1", n)
	}
	if n := metricSum(t, startServe(t, serveOptions{replicas: 3}).httpAddr, "sluice_replicas"); n != 3 {
		t.Errorf("--replicas 3: sluice_replicas %v, want 3", n)
	}
}
