package clustercmd

import (
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// tuningFlags are berth runtimeclasses' counterparts of the chart's
// runtimeClasses.overrides, createDefault, defaultName and defaultPlatform.
type tuningFlags struct {
	overhead, nodeSelector []string
	defaultPlatform        string
	defaultName            string
}

func (tf *tuningFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&tf.overhead, "overhead", nil, "PLATFORM:RESOURCE=QUANTITY[,...]: replace the pod overhead's cpu and/or memory of PLATFORM's class (kata-deploy's shims.<shim>.runtimeClass.overhead); repeatable")
	f.StringArrayVar(&tf.nodeSelector, "node-selector", nil, "PLATFORM:KEY=VALUE[,...]: also select nodes by these labels in PLATFORM's class, over berth's own (kata-deploy's shims.<shim>.runtimeClass.nodeSelector; keys under berth.dev/ are refused); repeatable")
	f.StringVar(&tf.defaultPlatform, "default-class", "", "also print a default RuntimeClass (--default-class-name) with the handler, overhead and selector of this platform, one of --platform (kata-deploy's runtimeClasses.createDefault and defaultShim)")
	f.StringVar(&tf.defaultName, "default-class-name", configure.DefaultRuntimeClassName, "the default RuntimeClass's name (kata-deploy's runtimeClasses.defaultName)")
}

// resolve returns each chosen platform's tuning and the platform of the
// default class (nil: none); every error is a usage error naming the flag.
func (tf *tuningFlags) resolve(ps []platform.Platform, sfx configure.Suffix) (map[platform.Platform]configure.RuntimeClassTuning, *platform.Platform, error) {
	tunings := map[platform.Platform]configure.RuntimeClassTuning{}
	chosen := func(flag, name string) (platform.Platform, error) {
		p, err := platform.Parse(name)
		if err != nil {
			return platform.Platform{}, cli.UsageErr(fmt.Errorf("--%s: %w", flag, err))
		}
		for _, q := range ps {
			if q == p {
				return p, nil
			}
		}
		return platform.Platform{}, cli.UsageErr(fmt.Errorf("--%s %s: not one of the --platform values, so it has no RuntimeClass here", flag, p))
	}
	for _, fl := range []struct {
		name   string
		values []string
		set    func(*configure.RuntimeClassTuning, map[string]string)
	}{
		{"overhead", tf.overhead, func(t *configure.RuntimeClassTuning, m map[string]string) {
			t.Overhead = mergeInto(t.Overhead, m)
		}},
		{"node-selector", tf.nodeSelector, func(t *configure.RuntimeClassTuning, m map[string]string) {
			t.NodeSelector = mergeInto(t.NodeSelector, m)
		}},
	} {
		for _, v := range fl.values {
			name, pairs, ok := strings.Cut(v, ":")
			if !ok || pairs == "" {
				return nil, nil, cli.UsageErr(fmt.Errorf("--%s %q: expected PLATFORM:KEY=VALUE[,KEY=VALUE...]", fl.name, v))
			}
			p, err := chosen(fl.name, name)
			if err != nil {
				return nil, nil, err
			}
			m := map[string]string{}
			for _, kv := range strings.Split(pairs, ",") {
				k, val, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, nil, cli.UsageErr(fmt.Errorf("--%s %q: %q is not KEY=VALUE", fl.name, v, kv))
				}
				m[k] = val
			}
			t := tunings[p]
			fl.set(&t, m)
			tunings[p] = t
		}
	}
	for p, t := range tunings {
		if err := t.Check(); err != nil {
			return nil, nil, cli.UsageErr(fmt.Errorf("platform %s's RuntimeClass: %w", p, err))
		}
	}
	if tf.defaultPlatform == "" {
		return tunings, nil, nil
	}
	p, err := chosen("default-class", tf.defaultPlatform)
	if err != nil {
		return nil, nil, err
	}
	if sfx != "" {
		return nil, nil, cli.UsageErr(fmt.Errorf("--default-class with --install-suffix: two side-by-side installs would both own RuntimeClass %s; create the default class with the unsuffixed install", tf.defaultName))
	}
	var classes []string
	for _, q := range ps {
		classes = append(classes, q.KataRuntimeClass())
	}
	if err := configure.CheckDefaultClassName(tf.defaultName, classes); err != nil {
		return nil, nil, cli.UsageErr(fmt.Errorf("--default-class-name: %w", err))
	}
	return tunings, &p, nil
}

// mergeInto copies m into into, which a repeated flag extends.
func mergeInto(into, m map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	maps.Copy(into, m)
	return into
}
