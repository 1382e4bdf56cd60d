package replay_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
