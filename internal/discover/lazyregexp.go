package discover

import (
	"regexp"
	"sync"
)

// lazyRegexp is a regular expression compiled on its first use. Discovery
// holds a few dozen patterns (binary versions, boot-log lines); compiled
// at package initialisation they cost about a millisecond of every berth
// command's start-up, `berth version` and `berth --help` included, while
// a run uses only those of the files it finds. Like a *regexp.Regexp it
// is safe for concurrent use and never changes once compiled.
type lazyRegexp struct {
	get func() *regexp.Regexp
}

// newLazyRegexp returns expr compiled on first use; an invalid expr
// panics then, as regexp.MustCompile would at start-up (TestLazyRegexps
// compiles them all).
func newLazyRegexp(expr string) *lazyRegexp {
	return &lazyRegexp{get: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// MatchString is (*regexp.Regexp).MatchString.
func (l *lazyRegexp) MatchString(s string) bool { return l.get().MatchString(s) }

// FindString is (*regexp.Regexp).FindString.
func (l *lazyRegexp) FindString(s string) string { return l.get().FindString(s) }

// FindStringSubmatch is (*regexp.Regexp).FindStringSubmatch.
func (l *lazyRegexp) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }
