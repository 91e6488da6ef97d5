package filter

import "strings"

// Hidden reports whether a file name is hidden (starts with a dot).
func Hidden(name string) bool {
	return strings.HasPrefix(name, ".")
}
