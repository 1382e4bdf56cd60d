// SPDX-License-Identifier: Apache-2.0

package buildinfo_test

import (
	"fmt"
	"runtime/debug"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

func ExampleFromInfo() {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "1b40f8a2c3d4e5f60718293a4b5c6d7e8f901234"},
		{Key: "vcs.time", Value: "2026-11-26T01:02:03Z"},
	}}
	fmt.Println(buildinfo.FromInfo(info))
	// Output: (devel) revision 1b40f8a2c3d4 (2026-11-26T01:02:03Z)
}
