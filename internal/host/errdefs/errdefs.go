// Package errdefs is berth's one error vocabulary, in the way of
// containerd's errdefs: a few sentinel errors that say who must act on a
// failure, and ExitCode, the one place that turns them into the exit
// status both binaries (berth and berth-cluster) return.
//
//   - ErrUsage: the command line or an input file is wrong; nothing was
//     done. Exit 2.
//   - ErrRefused: berth would not make a change (the node's files or
//     runtime would not survive it, a path leaves --root); nothing was
//     changed. Exit 1.
//   - ErrFailed: a change failed after it began; the error says what was
//     rolled back. Exit 1.
//   - ErrNotFound: what was asked for is not there (a handler the runtime
//     does not serve, an install that does not exist). Exit 1.
//   - ErrNotReady: a platform or node is not ready (check, verify). Exit 1.
//
// An error is classified by wrapping: Usage, Refused, Failed, NotFound and
// NotReady keep the message as it is and only add the class, so that
// errors.Is finds the sentinel and the text the user reads does not
// change. An error no class was given to exits 1: after the flags are
// validated, whatever goes wrong is a failure of the run, not a usage
// error. The package sits in the host wing, the lowest, and imports
// nothing of berth: every wing can classify its errors with it, hostfs's
// writable root (a path leaving --root is a refusal) and present (a
// failed write to stdout) included, which must not import node.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes. Their texts are what a bare sentinel prints; wrapped by
// Usage and the others they add nothing to an error's message.
var (
	// ErrUsage marks a usage or input error: exit 2.
	ErrUsage = errors.New("usage error")
	// ErrRefused marks a change berth will not make; nothing was changed.
	ErrRefused = errors.New("refused")
	// ErrFailed marks a change that failed after it began.
	ErrFailed = errors.New("failed")
	// ErrNotFound marks something asked for that is not there.
	ErrNotFound = errors.New("not found")
	// ErrNotReady marks a platform or node that is not ready.
	ErrNotReady = errors.New("not ready")
)

// Exit statuses, documented in the README ("Exit codes").
const (
	// ExitOK: success.
	ExitOK = 0
	// ExitFailure: not ready, refused, failed or not found; any error
	// after the flags were validated.
	ExitFailure = 1
	// ExitUsage: a usage or input error.
	ExitUsage = 2
)

// classified is err with a class added: its message is err's.
type classified struct {
	err   error
	class error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.err, c.class} }

func classify(err, class error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: class}
}

// Usage marks err as a usage or input error (nil stays nil).
func Usage(err error) error { return classify(err, ErrUsage) }

// Refused marks err as a refusal: nothing was changed (nil stays nil).
func Refused(err error) error { return classify(err, ErrRefused) }

// Failed marks err as a change that failed after it began (nil stays nil);
// err says what was rolled back.
func Failed(err error) error { return classify(err, ErrFailed) }

// NotFound marks err as something asked for that is not there.
func NotFound(err error) error { return classify(err, ErrNotFound) }

// NotReady marks err as a platform or node not ready.
func NotReady(err error) error { return classify(err, ErrNotReady) }

// Usagef is Usage(fmt.Errorf(format, a...)).
func Usagef(format string, a ...any) error { return Usage(fmt.Errorf(format, a...)) }

// IsUsage reports whether err is a usage or input error.
func IsUsage(err error) bool { return errors.Is(err, ErrUsage) }

// IsRefused reports whether err is a refusal.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }

// IsFailed reports whether err is a change that failed after it began.
func IsFailed(err error) bool { return errors.Is(err, ErrFailed) }

// IsNotFound reports whether err is something asked for that is not there.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsNotReady reports whether err is a platform or node not ready.
func IsNotReady(err error) bool { return errors.Is(err, ErrNotReady) }

// StatusError is an exit status decided elsewhere, passed through as it
// is: a delegated child process's (berth runs berth-cluster for some
// commands), or a verdict already printed. Err may be nil or have an empty
// message: then nothing more is printed.
type StatusError struct {
	// Code is the exit status.
	Code int
	// Err is what to print, if anything.
	Err error
}

func (e *StatusError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *StatusError) Unwrap() error { return e.Err }

// ExitCode is the one mapping of an error to berth's exit status: 0 for
// nil, a StatusError's own code, 2 for a usage error, 1 for everything
// else (refused, failed, not found, not ready, and any error after
// validation). The outermost class decides: a usage error met while a
// change was being made, and reported as Failed, is a failure.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	switch c := Class(err).(type) {
	case *StatusError:
		return c.Code
	case error:
		if c == ErrUsage {
			return ExitUsage
		}
	}
	return ExitFailure
}

// Class is the outermost class of err: one of the sentinels, a
// *StatusError, or nil when err has none. Outermost is the first met
// reading the wrapping from the outside in (errors.Is's order).
func Class(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *classified:
		return e.class
	case *StatusError:
		return e
	}
	for _, s := range sentinels() {
		if err == s {
			return s
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return Class(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if c := Class(e); c != nil {
				return c
			}
		}
	}
	return nil
}

// sentinels are the classes Class recognises bare (wrapped with %w).
func sentinels() [5]error {
	return [...]error{ErrUsage, ErrRefused, ErrFailed, ErrNotFound, ErrNotReady}
}
