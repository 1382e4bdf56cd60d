// SPDX-License-Identifier: Apache-2.0

package calibrate_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calibrate"
)

func ExampleCalibrate() {
	// Two riders: one opens the app (6 calls at once), one polls.
	trace := `0 ann
0 ann
0 ann
0 ann
0 ann
0 ann
0.1 ann
0.2 bob
0.7 bob
1.2 bob
`
	src := func() (calibrate.Reader, io.Closer, error) {
		r, err := calibrate.NewReader(strings.NewReader(trace), calibrate.Format{})
		return r, io.NopCloser(nil), err
	}
	rep, err := calibrate.Calibrate(context.Background(), src, calibrate.Config{
		Algorithm: sluice.TokenBucket,
		Keep:      calibrate.Billion, // every key
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A sustained rate (the busiest key's peak minute, per second) and
	// the burst that rate needs for ann's opening salvo.
	fmt.Println(rep.Policy)
	fmt.Println("refused:", rep.Replay.Refused)
	// Output:
	// calibrated: token-bucket 1/1s burst 7
	// refused: 0
}
