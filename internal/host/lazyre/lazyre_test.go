package lazyre

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestCompiledOnceOnFirstUse checks that concurrent first uses share one
// compilation, and that a bad expression panics when used, not when
// declared.
func TestCompiledOnceOnFirstUse(t *testing.T) {
	re := New(`^v(\d+)\.(\d+)$`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if m := re.FindStringSubmatch("v2.4"); len(m) != 3 || m[1] != "2" || m[2] != "4" {
				t.Errorf("FindStringSubmatch = %q", m)
			}
		})
	}
	wg.Wait()
	if re.Get() != re.Get() {
		t.Error("compiled twice")
	}
	if !re.MatchString("v1.0") || re.FindString("x") != "" || re.FindIndex([]byte("v3.1")) == nil {
		t.Error("methods disagree with the expression")
	}
	// An invalid expression panics on first use, as regexp.MustCompile
	// would, and on every use after, with the same message.
	bad := New(`(`)
	_, want := regexp.Compile(`(`)
	for i := range 2 {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want.Error()) {
					t.Errorf("use %d of an invalid expression: panic %v, want one with %q", i+1, r, want)
				}
			}()
			bad.MatchString("")
		}()
	}
}

// TestGetDoesNotAllocate: once compiled, a pattern costs its users no
// allocation (the sync.Once's bound method stays on the stack).
func TestGetDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { pkgLevel.Get() }); n != 0 {
		t.Errorf("Get of a compiled pattern allocates %v times", n)
	}
}

var pkgLevel = New(`^static$`)
