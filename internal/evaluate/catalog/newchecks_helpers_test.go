package catalog

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// finding evaluates f on the platform named and returns the finding of
// check id there, and false when the check does not apply to it.
func finding(t *testing.T, f *facts.Facts, name, id string) (check.Finding, bool) {
	t.Helper()
	p, err := platform.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	v := evaluator(t, f).Evaluate(f, []platform.Platform{p}, check.Options{})[0]
	for _, fd := range v.Findings {
		if fd.ID == id {
			return fd, true
		}
	}
	return check.Finding{}, false
}

// wantFinding asserts the status, that the message mentions want, that
// there is evidence, and that a failure or warning carries a remedy.
func wantFinding(t *testing.T, fd check.Finding, status check.Status, want string) {
	t.Helper()
	if fd.Status != status {
		t.Errorf("%s: status %s (%s), want %s", fd.ID, fd.Status, fd.Message, status)
	}
	if want != "" && !strings.Contains(fd.Message, want) {
		t.Errorf("%s: message %q does not mention %q", fd.ID, fd.Message, want)
	}
	if (status == check.Fail || status == check.Warn) && fd.Remedy == "" {
		t.Errorf("%s: %s without a remedy", fd.ID, status)
	}
	if status != check.Skip && len(fd.Evidence) == 0 {
		t.Errorf("%s: no evidence", fd.ID)
	}
}
