package configure

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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

// Check refuses what a RuntimeClass cannot carry or what would take
// berth's guards away, naming the entry.
func (t RuntimeClassTuning) Check() error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.Overhead)) {
		v := t.Overhead[k]
		if k != "cpu" && k != "memory" {
			errs = append(errs, fmt.Errorf("overhead %s: expected cpu or memory (berth sets the TEE key resources itself)", k))
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("overhead %s %q: expected a Kubernetes quantity such as 250m, 1 or 512Mi", k, v))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("overhead %s %q: expected a quantity of 0 or more", k, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.NodeSelector)) {
		v := t.NodeSelector[k]
		if strings.HasPrefix(k, labelPrefix) {
			errs = append(errs, fmt.Errorf("nodeSelector %s: keys under %s are berth's own (they select the nodes where the platform is installed) and cannot be overridden", k, labelPrefix))
			continue
		}
		if e := validation.IsQualifiedName(k); len(e) > 0 {
			errs = append(errs, fmt.Errorf("nodeSelector key %q: %s", k, strings.Join(e, "; ")))
		}
		if e := validation.IsValidLabelValue(v); len(e) > 0 {
			errs = append(errs, fmt.Errorf("nodeSelector %s value %q: %s", k, v, strings.Join(e, "; ")))
		}
	}
	return errors.Join(errs...)
}

// CheckDefaultClassName refuses a default class name the API server
// would refuse or that is already the name of a chosen platform's class.
func CheckDefaultClassName(name string, classes []string) error {
	if e := validation.IsDNS1123Subdomain(name); len(e) > 0 {
		return fmt.Errorf("default RuntimeClass name %q: %s", name, strings.Join(e, "; "))
	}
	if slices.Contains(classes, name) {
		return fmt.Errorf("default RuntimeClass name %q is already a chosen platform's RuntimeClass: choose another name", name)
	}
	return nil
}
