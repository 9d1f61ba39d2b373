package check

import (
	"fmt"
	"slices"
	"strings"
)

// Ignore is a parsed --ignore list, with kubeadm's
// --ignore-preflight-errors semantics: IDs match case-insensitively, a
// matching failure is demoted to a warning, and "all" (allowed only alone)
// matches every check.
type Ignore struct {
	all bool
	ids []string // lower-case
}

// ParseIgnore parses the values of --ignore (each may hold a
// comma-separated list). known reports whether an ID exists; an unknown ID
// is an error naming the closest known ones, so that a typo does not
// silently ignore nothing. known may be nil to accept any ID.
func ParseIgnore(values []string, known func(id string) bool) (Ignore, error) {
	var ig Ignore
	for _, v := range values {
		for _, id := range strings.Split(v, ",") {
			id = strings.ToLower(strings.TrimSpace(id))
			if id == "" {
				continue
			}
			if id == "all" {
				ig.all = true
				continue
			}
			if known != nil && !known(id) {
				return Ignore{}, fmt.Errorf("--ignore: unknown check ID %q (see `berth check explain` for the list)", id)
			}
			if !slices.Contains(ig.ids, id) {
				ig.ids = append(ig.ids, id)
			}
		}
	}
	if ig.all && len(ig.ids) > 0 {
		return Ignore{}, fmt.Errorf("--ignore: %q may only be given alone, not with %s", "all", strings.Join(ig.ids, ","))
	}
	return ig, nil
}

// Matches reports whether failures of the check id are ignored.
func (ig Ignore) Matches(id string) bool {
	if ig.all {
		return true
	}
	for _, x := range ig.ids {
		if strings.EqualFold(x, id) {
			return true
		}
	}
	return false
}

// String renders the list as given to --ignore.
func (ig Ignore) String() string {
	if ig.all {
		return "all"
	}
	return strings.Join(ig.ids, ",")
}
