package filter

import "strings"

// Hidden reports whether a file name is hidden (starts with a dot).
func Hidden(name string) bool {
	return strings.HasPrefix(name, ".")
}

// Ignored reports whether name falls under one of the ignored directory prefixes.
func Ignored(name string, prefixes []string) bool {
	for _, prefix := range prefixes {
		if strings.HasPrefix(prefix, name) {
			return true
		}
	}
	return false
}
