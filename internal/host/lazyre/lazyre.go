// Package lazyre holds regular expressions compiled on their first use.
// berth holds a few dozen patterns (binary versions, boot-log lines,
// plug-in names, config errors); compiled at package initialisation they
// cost about a millisecond of every command's start-up, `berth version`
// and `berth --help` included, while a run uses only those of the files it
// meets.
package lazyre

import (
	"regexp"
	"strconv"
	"sync"
)

// Regexp is a regular expression compiled on its first use. Like a
// *regexp.Regexp it is safe for concurrent use and never changes once
// compiled.
//
// It holds its expression and a sync.Once rather than a sync.OnceValue:
// New is then a plain composite literal, which the compiler lays out as
// static data, so that the package-level patterns cost no allocation at
// initialisation (a closure and two objects each through OnceValue).
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
	err  error
}

// New returns expr compiled on first use; an invalid expr panics then, as
// regexp.MustCompile would at start-up, and at every use after, so each
// package's tests compile theirs with Get.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Get returns the compiled expression, compiling it the first time.
func (l *Regexp) Get() *regexp.Regexp {
	l.once.Do(l.compile)
	if l.err != nil {
		panic("regexp: Compile(" + strconv.Quote(l.expr) + "): " + l.err.Error())
	}
	return l.re
}

func (l *Regexp) compile() { l.re, l.err = regexp.Compile(l.expr) }

// MatchString is (*regexp.Regexp).MatchString.
func (l *Regexp) MatchString(s string) bool { return l.Get().MatchString(s) }

// FindString is (*regexp.Regexp).FindString.
func (l *Regexp) FindString(s string) string { return l.Get().FindString(s) }

// FindStringSubmatch is (*regexp.Regexp).FindStringSubmatch.
func (l *Regexp) FindStringSubmatch(s string) []string { return l.Get().FindStringSubmatch(s) }

// FindIndex is (*regexp.Regexp).FindIndex.
func (l *Regexp) FindIndex(b []byte) []int { return l.Get().FindIndex(b) }
