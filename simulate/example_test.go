// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
)

func ExampleRun() {
	reqs, err := simulate.ParsePattern("burst 6 at 0, then 1 every 100ms for 1s")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second}
	r, err := simulate.Run(context.Background(), p, reqs)
	if err != nil {
		fmt.Println(err)
		return
	}
	admitted, delayed, refused := r.Counts()
	fmt.Println(admitted, delayed, refused)
	// r.WriteSVG(os.Stdout, "fixed window") draws it.

	// Output: 11 0 5
}
