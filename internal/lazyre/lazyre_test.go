package lazyre

import (
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
	bad := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("an invalid expression did not panic on first use")
		}
	}()
	bad.MatchString("")
}
