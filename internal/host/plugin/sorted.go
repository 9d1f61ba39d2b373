package plugin

import (
	"iter"
	"maps"
	"slices"
)

// sortedKeys iterates m in key order so that results and errors are stable.
func sortedKeys[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
