// Package lazyre holds regular expressions compiled on their first use.
// berth holds a few dozen patterns (binary versions, boot-log lines,
// plug-in names, config errors); compiled at package initialisation they
// cost about a millisecond of every command's start-up, `berth version`
// and `berth --help` included, while a run uses only those of the files it
// meets.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on its first use. Like a
// *regexp.Regexp it is safe for concurrent use and never changes once
// compiled.
type Regexp struct {
	get func() *regexp.Regexp
}

// New returns expr compiled on first use; an invalid expr panics then, as
// regexp.MustCompile would at start-up, so each package's tests compile
// theirs with Get.
func New(expr string) *Regexp {
	return &Regexp{get: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// Get returns the compiled expression, compiling it the first time.
func (l *Regexp) Get() *regexp.Regexp { return l.get() }

// MatchString is (*regexp.Regexp).MatchString.
func (l *Regexp) MatchString(s string) bool { return l.get().MatchString(s) }

// FindString is (*regexp.Regexp).FindString.
func (l *Regexp) FindString(s string) string { return l.get().FindString(s) }

// FindStringSubmatch is (*regexp.Regexp).FindStringSubmatch.
func (l *Regexp) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }

// FindIndex is (*regexp.Regexp).FindIndex.
func (l *Regexp) FindIndex(b []byte) []int { return l.get().FindIndex(b) }
