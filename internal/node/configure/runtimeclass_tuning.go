package configure

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// DefaultRuntimeClassName is the name of the cluster's default Kata class
// when asked for one, as kata-deploy's runtimeClasses.defaultName.
const DefaultRuntimeClassName = "kata"

// RuntimeClassTuning is an operator's override of one platform's
// RuntimeClass, as kata-deploy's shims.<shim>.runtimeClass takes it: the
// pod overhead to reserve and further nodes to select.
type RuntimeClassTuning struct {
	// Overhead replaces entries of overhead.podFixed: cpu and/or memory,
	// as Kubernetes quantities. A TEE key resource stays berth's: without
	// it the scheduler would place more confidential pods on a node than
	// it has keys.
	Overhead map[string]string
	// NodeSelector is merged over berth's own selector; a value for one
	// of its keys replaces it. Keys under berth.dev/ are refused: the
	// installed (or capability) label is what keeps pods off nodes that
	// cannot run them.
	NodeSelector map[string]string
}

// Empty reports whether t changes nothing.
func (t RuntimeClassTuning) Empty() bool { return len(t.Overhead) == 0 && len(t.NodeSelector) == 0 }

// The grammars of the values, as the API server checks them. They are
// compiled when a tuning is checked, not at start-up, and written here
// rather than taken from apimachinery, whose validation and quantity
// packages would add their start-up work to the host binary (berth).
const (
	// quantityPattern is resource.Quantity's syntax without a sign.
	quantityPattern = `^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$`
	// dnsSubdomainPattern is a DNS-1123 subdomain (at most 253 bytes).
	dnsSubdomainPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// labelNamePattern is a label's name or value (at most 63 bytes).
	labelNamePattern = `^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
)

// Check refuses what a RuntimeClass cannot carry or what would take
// berth's guards away, naming the entry.
func (t RuntimeClassTuning) Check() error {
	quantity := regexp.MustCompile(quantityPattern)
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.Overhead)) {
		v := t.Overhead[k]
		switch {
		case k != "cpu" && k != "memory":
			errs = append(errs, fmt.Errorf("overhead %s: expected cpu or memory (berth sets the TEE key resources itself)", k))
		case strings.HasPrefix(v, "-"):
			errs = append(errs, fmt.Errorf("overhead %s %q: expected a quantity of 0 or more", k, v))
		case !quantity.MatchString(v):
			errs = append(errs, fmt.Errorf("overhead %s %q: expected a Kubernetes quantity such as 250m, 1 or 512Mi", k, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.NodeSelector)) {
		v := t.NodeSelector[k]
		if strings.HasPrefix(k, labelPrefix) {
			errs = append(errs, fmt.Errorf("nodeSelector %s: keys under %s are berth's own (they select the nodes where the platform is installed) and cannot be overridden", k, labelPrefix))
			continue
		}
		if err := checkLabelKey(k); err != nil {
			errs = append(errs, fmt.Errorf("nodeSelector key %q: %w", k, err))
		}
		if v != "" && (len(v) > 63 || !regexp.MustCompile(labelNamePattern).MatchString(v)) {
			errs = append(errs, fmt.Errorf("nodeSelector %s value %q: expected at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k, v))
		}
	}
	return errors.Join(errs...)
}

// checkLabelKey checks a qualified name: [DNS subdomain/]name.
func checkLabelKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	if hasPrefix && (prefix == "" || len(prefix) > 253 || !regexp.MustCompile(dnsSubdomainPattern).MatchString(prefix)) {
		return fmt.Errorf("prefix %q: expected a DNS subdomain (lower-case letters, digits, '-' and '.')", prefix)
	}
	if len(name) > 63 || !regexp.MustCompile(labelNamePattern).MatchString(name) {
		return errors.New("expected a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, after an optional DNS prefix and '/'")
	}
	return nil
}

// CheckDefaultClassName refuses a default class name the API server
// would refuse or that is already the name of a chosen platform's class.
func CheckDefaultClassName(name string, classes []string) error {
	if len(name) > 253 || !regexp.MustCompile(dnsSubdomainPattern).MatchString(name) {
		return fmt.Errorf("default RuntimeClass name %q: expected a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)", name)
	}
	if slices.Contains(classes, name) {
		return fmt.Errorf("default RuntimeClass name %q is already a chosen platform's RuntimeClass: choose another name", name)
	}
	return nil
}
