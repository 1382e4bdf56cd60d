// SPDX-License-Identifier: Apache-2.0

package replay_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/replay"
)

func ExampleReader() {
	trace := `# SECONDS KEY [COST]
0     rider
0.1   rider
59.5  partner 3
`
	r := replay.NewReader(strings.NewReader(trace))
	for {
		req, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		fmt.Printf("line %d: %v %s ×%d\n", req.Line, req.At, req.Key, req.Cost)
	}
	// Output:
	// line 2: 0s rider ×1
	// line 3: 100ms rider ×1
	// line 4: 59.5s partner ×3
}

func ExampleAppendSeconds() {
	for _, d := range []time.Duration{0, 1300 * time.Millisecond, time.Second / 3, time.Minute} {
		fmt.Println(string(replay.AppendSeconds(nil, d)))
	}
	// Output:
	// 0
	// 1.3
	// 0.333333333
	// 60
}

func ExampleRun() {
	// The rider app opens: six requests at once, then one 0.1 s and one
	// 0.2 s later, through a bucket of 10 refilling 5 per second.
	trace := "0 rider\n0 rider\n0 rider\n0 rider\n0 rider\n0 rider\n0.1 rider\n0.2 rider\n"

	clock := new(replay.Clock)
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	cfg := replay.Config{
		Policy:  sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10},
		Store:   store,
		SetTime: clock.Set,
	}
	if err := replay.Run(context.Background(), cfg, strings.NewReader(trace), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	// Output:
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":9,"reset_after":0.2}
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":8,"reset_after":0.4}
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":7,"reset_after":0.6}
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":6,"reset_after":0.8}
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":5,"reset_after":1}
	// {"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":4,"reset_after":1.2}
	// {"t":0.1,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.3}
	// {"t":0.2,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.4}
}
