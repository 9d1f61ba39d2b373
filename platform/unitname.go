package platform

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// unitNameMax is the longest unit name systemd accepts: UNIT_NAME_MAX
// (256) counts the terminating NUL (src/basic/unit-name.h).
const unitNameMax = 255

// unitTypes are systemd's unit types (unit_type_table in
// src/basic/unit-def.c): the suffixes a unit name may end in.
const unitTypes = "service, mount, swap, socket, target, device, automount, timer, path, slice, scope"

// CheckServiceName refuses name unless systemd accepts it as the name of
// a service unit, by unit_name_is_valid's rules (src/basic/unit-name.c):
// at most 255 bytes, a prefix of letters, digits and ":-_.\", an optional
// "@instance" (the same characters and "@"; an instance is needed, a
// template cannot run), and the suffix ".service". A runtime's unit is
// restarted over D-Bus and named in the commands berth prints; a name
// systemd would reject (a space, a newline, a shell metacharacter) is
// refused here rather than carried into either.
func CheckServiceName(name string) error {
	if err := CheckUnitName(name); err != nil {
		return err
	}
	if !strings.HasSuffix(name, ".service") {
		return fmt.Errorf("%q: expected a service unit (a name ending in .service, such as containerd.service)", name)
	}
	return nil
}

// CheckUnitName refuses name unless systemd accepts it as a unit name
// (unit_name_is_valid with UNIT_NAME_PLAIN|UNIT_NAME_INSTANCE).
func CheckUnitName(name string) error {
	if err := CheckText(name); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("empty unit name")
	}
	if len(name) > unitNameMax {
		return fmt.Errorf("unit name of %d bytes: systemd accepts at most %d", len(name), unitNameMax)
	}
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return fmt.Errorf("%q: expected a unit name with its type (containerd.service)", name)
	}
	base, typ := name[:dot], name[dot+1:]
	if !slices.Contains(strings.Split(unitTypes, ", "), typ) {
		return fmt.Errorf("%q: unknown unit type %q: expected one of %s", name, typ, unitTypes)
	}
	prefix, instance, templated := strings.Cut(base, "@")
	if prefix == "" || !unitChars(prefix, false) {
		return fmt.Errorf("%q: expected a unit name of letters, digits and \":-_.\\\"", name)
	}
	if templated && (instance == "" || !unitChars(instance, true)) {
		return fmt.Errorf("%q: expected an instance after \"@\" (letters, digits and \":-_.\\@\"); a template cannot run", name)
	}
	return nil
}

// unitChars: every byte of s is in systemd's VALID_CHARS (and "@" in an
// instance).
func unitChars(s string, instance bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(":-_.\\", c) >= 0:
		case instance && c == '@':
		default:
			return false
		}
	}
	return true
}

// CheckText refuses a name or path that berth would carry into a file
// another program parses line by line (a systemd unit, a TOML config) or
// into a command it prints: invalid UTF-8 or a control character (a
// newline would end the line and start a directive of the user's
// choosing; a tab or escape would hide part of it on a terminal).
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q: not valid UTF-8", s)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%q: control character %U at byte %d", s, r, i)
		}
	}
	return nil
}
