package errdefs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// TestExitCode: each class maps to its exit status, the outermost class
// decides, a class added keeps the message, and an error without a class
// (anything after validation: a full disk, a refused path) exits 1.
func TestExitCode(t *testing.T) {
	base := errors.New("bad thing")
	enospc := &fs.PathError{Op: "write", Path: "etc/containerd/config.toml", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name string
		err  error
		code int
		is   error
	}{
		{"nil", nil, ExitOK, nil},
		{"unclassified", base, ExitFailure, nil},
		{"disk full", fmt.Errorf("writing: %w", enospc), ExitFailure, nil},
		{"usage", Usage(base), ExitUsage, ErrUsage},
		{"usage wrapped", fmt.Errorf("--flag: %w", Usage(base)), ExitUsage, ErrUsage},
		{"usagef", Usagef("--parallel %d: expected 1 or more", -1), ExitUsage, ErrUsage},
		{"refused", Refused(base), ExitFailure, ErrRefused},
		{"refused as %w", fmt.Errorf("%w: %w", ErrRefused, base), ExitFailure, ErrRefused},
		{"failed", Failed(base), ExitFailure, ErrFailed},
		{"not found", NotFound(base), ExitFailure, ErrNotFound},
		{"not ready", NotReady(base), ExitFailure, ErrNotReady},
		{"failed around a usage error", Failed(fmt.Errorf("run: %w", Usage(base))), ExitFailure, ErrFailed},
		{"usage around a refusal", Usage(Refused(base)), ExitUsage, ErrUsage},
		{"joined: first class wins", errors.Join(base, Usage(base), Refused(base)), ExitUsage, ErrUsage},
		{"status", &StatusError{Code: 3}, 3, nil},
		{"status wrapped", fmt.Errorf("child: %w", &StatusError{Code: 7, Err: base}), 7, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.code {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.code)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.is)
			}
			if tc.is != nil && !errors.Is(tc.err, base) && !errors.Is(tc.err, enospc) && tc.name != "usagef" {
				t.Errorf("the class hid the cause: errors.Is(%v, base) = false", tc.err)
			}
		})
	}
}

// TestClassKeepsMessage: a class adds nothing to what the user reads.
func TestClassKeepsMessage(t *testing.T) {
	base := errors.New("--kata-config-dir etc: expected an absolute path")
	for _, f := range []func(error) error{Usage, Refused, Failed, NotFound, NotReady} {
		if got := f(base).Error(); got != base.Error() {
			t.Errorf("message %q, want %q", got, base.Error())
		}
		if f(nil) != nil {
			t.Error("a class of nil is not nil")
		}
	}
	if IsUsage(Refused(base)) || !IsRefused(Refused(base)) || !IsFailed(Failed(base)) || !IsNotFound(NotFound(base)) || !IsNotReady(NotReady(base)) {
		t.Error("Is* disagree with the class")
	}
	if (&StatusError{Code: 1}).Error() != "" {
		t.Error("a StatusError without an error prints something")
	}
}
