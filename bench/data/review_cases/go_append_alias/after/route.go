package route

// Expand returns one path per child: the parent's segments followed by the child.
func Expand(parent []string, children []string) [][]string {
	out := make([][]string, 0, len(children))
	for _, child := range children {
		out = append(out, append(parent, child))
	}
	return out
}
