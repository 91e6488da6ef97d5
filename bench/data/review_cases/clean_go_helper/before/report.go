package report

import (
	"fmt"
	"strings"
)

// Table renders name/value rows, names padded to the longest one.
func Table(names []string, values []int) string {
	width := 0
	for _, name := range names {
		if len(name) > width {
			width = len(name)
		}
	}
	var b strings.Builder
	for i, name := range names {
		fmt.Fprintf(&b, "%-*s %d\n", width, name, values[i])
	}
	return b.String()
}
