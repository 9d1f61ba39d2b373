package configure

import (
	"fmt"
	"regexp"
	"strings"

	"berth.dev/berth/platform"
)

// Suffix tells apart side-by-side installs of berth on one node (an A/B
// upgrade: two releases, each with its own handlers, prefix and files).
// Every per-install name derives from it here and nowhere else, the way
// kata-deploy's multiInstallSuffix does: the suffix is appended with a
// dash (kata-qemu-snp -> kata-qemu-snp-<suffix>, /opt/berth ->
// /opt/berth-<suffix>), so a pod written for kata-deploy's suffixed
// classes finds berth's of the same suffix. The empty Suffix is the
// ordinary, unsuffixed install: every name is as without suffixes.
type Suffix string

// MaxSuffixLen is the longest suffix: with it, the longest RuntimeClass
// and handler name of any platform (41 characters) still fits the 63 of a
// DNS label. Names that are longer for a given platform (node labels)
// are checked per platform by Suffix.Check.
const MaxSuffixLen = 21

// suffixRE is a DNS label (RFC 1123) in lower case: what a RuntimeClass
// name, a label value and a path component all accept.
var suffixRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// SuffixLabel labels what a suffixed install creates in the cluster
// (RuntimeClasses) with its suffix, as kata-deploy's kata-deploy/instance.
const SuffixLabel = labelPrefix + "install-suffix"

// ParseSuffix validates s as an install suffix; flag names the flag or
// value it came from, for the message ("--install-suffix").
func ParseSuffix(flag, s string) (Suffix, error) {
	switch {
	case s == "":
		return "", nil
	case len(s) > MaxSuffixLen:
		return "", fmt.Errorf("%s %q: %d characters, expected at most %d (the suffixed RuntimeClass and handler names must stay within 63)", flag, s, len(s), MaxSuffixLen)
	case !suffixRE.MatchString(s):
		return "", fmt.Errorf("%s %q: expected lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS label, as it becomes part of RuntimeClass, handler and label names and of paths)", flag, s)
	}
	return Suffix(s), nil
}

// Of appends the suffix to name: name itself for the unsuffixed install.
func (s Suffix) Of(name string) string {
	if s == "" {
		return name
	}
	return name + "-" + string(s)
}

// Handler is p's containerd (CRI-O) runtime handler for this install.
func (s Suffix) Handler(p platform.Platform) string { return s.Of(p.Handler()) }

// RuntimeClass is p's RuntimeClass name for this install.
func (s Suffix) RuntimeClass(p platform.Platform) string { return s.Of(p.KataRuntimeClass()) }

// Prefix is the install prefix for this install: DefaultPrefix suffixed.
// A prefix given explicitly is used as given.
func (s Suffix) Prefix() string { return s.Of(DefaultPrefix) }

// Block is the ID of p's handler block in a shared runtime config.
func (s Suffix) Block(p platform.Platform) string { return s.Of(p.Name()) }

// InstalledLabelPrefix + platform name (suffixed) is the label a
// node-installer sets on a node: "true" where the platform was installed
// and its handler is live, "no" where its checks fail.
const InstalledLabelPrefix = labelPrefix + "installed."

// labelPrefix and installStatusAnnotation are api/v1alpha1's LabelPrefix
// and InstallStatusAnnotation (a test holds them equal), spelled here
// because importing the API package would link apimachinery, and with it
// net/http, into the berth binary, which opens no connection.
const (
	labelPrefix             = "berth.dev/"
	installStatusAnnotation = labelPrefix + "install-status"
)

// InstalledLabel is the node label a node-installer of this install sets
// where p is installed (berth.dev/installed.<name>[-<suffix>]).
func (s Suffix) InstalledLabel(p platform.Platform) string {
	return InstalledLabelPrefix + s.Of(p.Name())
}

// NodeInstallerFieldManager owns the node-installer's labels (server-side
// apply), apart from the agent's v1alpha1.FieldManager, so that neither
// removes the other's.
const NodeInstallerFieldManager = "berth-node-installer"

// FieldManager owns this install's labels and annotation on a node: each
// suffix its own, so that one release's apply never takes away another's
// labels.
func (s Suffix) FieldManager() string { return s.Of(NodeInstallerFieldManager) }

// StatusAnnotation is this install's install-status annotation:
// berth.dev/install-status, suffixed for a side-by-side install (the
// agent reads the unsuffixed one).
func (s Suffix) StatusAnnotation() string { return s.Of(installStatusAnnotation) }

// Check reports the first name derived for p that the suffix makes
// invalid: a label key's name part (after the '/') longer than 63.
func (s Suffix) Check(p platform.Platform) error {
	names := map[string]string{
		"handler":         s.Handler(p),
		"RuntimeClass":    s.RuntimeClass(p),
		"installed label": s.InstalledLabel(p),
	}
	for _, what := range []string{"handler", "RuntimeClass", "installed label"} {
		n := names[what]
		if i := strings.LastIndex(n, "/"); i >= 0 {
			n = n[i+1:]
		}
		if len(n) > 63 {
			return fmt.Errorf("install suffix %q: platform %s's %s %s would be %d characters, more than 63: choose a shorter suffix", string(s), p, what, names[what], len(n))
		}
	}
	return nil
}

// HandlersOf lists the handlers the install of suffix s applied, sorted:
// remove --all takes away one install's handlers and leaves the others'.
func (st *State) HandlersOf(s Suffix) []string {
	var out []string
	for _, h := range st.Handlers() {
		if st.Platforms[h].Suffix == string(s) {
			out = append(out, h)
		}
	}
	return out
}

// handlerSnapshotter is the snapshotter p's handler of this install names.
func (ps Paths) handlerSnapshotter(p platform.Platform) string {
	if s := HandlerSnapshotter(p); s != NydusProxy {
		return s
	}
	return NydusNamesFor(ps).Proxy
}

// suffixFlag is the flag that names an install of suffix s in a command
// berth suggests ("" for the unsuffixed install).
func suffixFlag(s string) string {
	if s == "" {
		return ""
	}
	return " --install-suffix " + s
}
