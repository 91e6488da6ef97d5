package report

import (
	"fmt"
	"strings"
)

func longest(names []string) int {
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	return width
}

// Table renders name/value rows, names padded to the longest one.
func Table(names []string, values []int) string {
	width := longest(names)
	var b strings.Builder
	for i, name := range names {
		fmt.Fprintf(&b, "%-*s %d\n", width, name, values[i])
	}
	return b.String()
}
