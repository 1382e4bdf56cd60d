// SPDX-License-Identifier: Apache-2.0

package good

import "fmt"

func ExampleRuns() {
	fmt.Println(1)
	// A comment of its own.

	// Output: 1
}

func ExampleUnordered() {
	fmt.Println(2)
	// Unordered output:
	// 2
}

func ExampleEmpty() {
	// Output:
}

func ExampleCompiledOnly() {
	fmt.Println("not checked, and says so by having no output comment")
}
