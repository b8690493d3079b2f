package config

// suggest returns the name in names closest to key, for a "did you mean"
// after an unknown key: within one edit (a letter added, dropped, changed,
// or two swapped) for short keys, a third of the key's length for longer
// ones; "" when none is that close, or two are equally close.
func suggest(key string, names []string) string {
	limit := max(1, len(key)/3)
	best, bestD, tie := "", limit+1, false
	for _, n := range names {
		d := editDistance(key, n)
		switch {
		case d < bestD:
			best, bestD, tie = n, d, false
		case d == bestD:
			tie = true
		}
	}
	if tie || best == "" {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest letters inserted, deleted, substituted or swapped with their
// neighbour (a typed "htpp" is one swap from "http").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows do.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
