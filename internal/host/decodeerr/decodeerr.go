// Package decodeerr words the errors of YAML, JSON and TOML decoders for
// files a user points berth at, without quoting the files' text. A
// decoder's message quotes what it choked on (a key, a value, a line):
// given a file that is no manifest at all (/etc/shadow, a key file) that
// quote would print a secret on the terminal and into logs. The messages
// keep where (line, field path) and what was expected; a quoted name
// survives only when it reads as a field name.
package decodeerr

import (
	"strings"

	"berth.dev/berth/internal/host/lazyre"
)

// fieldName is what a quoted name must look like to be shown: a field of
// a manifest, a Job or a config (letters, digits, "_", "-", "." and "/"
// as in apiVersion, kernelCmdline, io.containerd.grpc.v1.cri), short.
var fieldName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_./-]{0,63}$`)

// quoted matches a span a decoder quoted: "…", `…` or '…' (Go-escaped
// quotes inside double quotes included).
var quoted = lazyre.New("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`|'[^']*'")

// Field is name as a message may show it: quoted when it reads as a
// field name, else a placeholder that says the text was withheld.
func Field(name string) string {
	if fieldName.MatchString(name) {
		return `"` + name + `"`
	}
	return "(a name that is not a field name; its text is not shown)"
}

// Message is msg with every quoted span that is not a field name (or a
// single character: the ',' and ']' of "did not find expected ',' or
// ']'") replaced by "(text not shown)", on one line (go-yaml puts each of
// several errors on a line of its own, "line N: ..."). Only the
// decoders' Error texts are for it: go-toml's DecodeError.String, which
// appends the source lines around the error, must never be passed.
func Message(msg string) string {
	var lines []string
	for l := range strings.SplitSeq(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	msg = strings.Join(lines, " ")
	return quoted.Get().ReplaceAllStringFunc(msg, func(q string) string {
		inner := q[1 : len(q)-1]
		if len([]rune(inner)) <= 1 || fieldName.MatchString(inner) {
			return q
		}
		return "(text not shown)"
	})
}

// Value is a value from the document as a message may show it: quoted
// when it reads as a name (an apiVersion, a kind), else withheld.
func Value(v string) string {
	if fieldName.MatchString(v) {
		return `"` + v + `"`
	}
	return "(text not shown)"
}

// Error is err's message, as Message words it; "" for nil.
func Error(err error) string {
	if err == nil {
		return ""
	}
	return Message(err.Error())
}
