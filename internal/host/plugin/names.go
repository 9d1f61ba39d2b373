// Package plugin reads what host owners add to berth's view of a host:
// feature files (etc/berth/features.d, plain key=value data, never
// executed) and, only when the operator opts in, executable checks
// (etc/berth/checks.d) that print facts and findings as JSON.
package plugin

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"berth.dev/berth/internal/host/lazyre"
)

// Limits of keys and values, as for Kubernetes label keys (a feature may
// well end up as a node label).
const (
	maxKeyName   = 63
	maxKeyPrefix = 253
	maxValue     = 1024
)

var (
	keyNameRE   = lazyre.New(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	keyPrefixRE = lazyre.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// KeyRule says in words what ValidateKey accepts, for error messages and
// documentation.
const KeyRule = "a key is [prefix/]name: name is 1-63 characters of A-Z a-z 0-9 - _ . starting and ending with a letter or digit; the optional prefix is a lower-case DNS subdomain (at most 253 characters)"

// ValidateKey checks that key is label-like (see KeyRule).
func ValidateKey(key string) error {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case key == "":
		return fmt.Errorf("empty key; %s", KeyRule)
	case hasPrefix && (len(prefix) > maxKeyPrefix || !keyPrefixRE.MatchString(prefix)):
		return fmt.Errorf("invalid key %q: bad prefix %q; %s", clip(key), clip(prefix), KeyRule)
	case len(name) > maxKeyName || !keyNameRE.MatchString(name):
		return fmt.Errorf("invalid key %q; %s", clip(key), KeyRule)
	}
	return nil
}

// ValidateValue checks a feature value: UTF-8 text of at most 1024 bytes
// without control characters.
func ValidateValue(v string) error {
	switch {
	case len(v) > maxValue:
		return fmt.Errorf("value of %d bytes, expected at most %d", len(v), maxValue)
	case !utf8.ValidString(v):
		return fmt.Errorf("value %q is not valid UTF-8", clip(v))
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("value %q contains a control character", clip(v))
	}
	return nil
}

// clip shortens untrusted text quoted in error messages.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
