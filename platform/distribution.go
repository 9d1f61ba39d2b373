package platform

import (
	"fmt"
	"path"
	"strings"
)

// Runtime is the container runtime a distribution drives.
type Runtime string

// The container runtimes berth configures.
const (
	Containerd Runtime = "containerd"
	CRIO       Runtime = "crio"
)

// DropIn is how a distribution lets a runtime configuration be extended.
type DropIn string

// Drop-in mechanisms.
const (
	// DropInImports: the main config lists `imports` globs (containerd >= 2.0
	// default config has imports = ['/etc/containerd/conf.d/*.toml']); on
	// containerd 1.x berth adds the imports line after backing up the file.
	DropInImports DropIn = "imports"
	// DropInTemplate: the distribution renders its config from a Go template
	// (k3s, RKE2: config.toml.tmpl or config-v3.toml.tmpl; microk8s:
	// containerd-template.toml); berth writes or extends the template.
	DropInTemplate DropIn = "template"
	// DropInDirectory: every file in a directory is loaded (k0s
	// containerd.d, CRI-O crio.conf.d).
	DropInDirectory DropIn = "directory"
)

// Layout is where a distribution keeps its container runtime: the data that
// makes a distribution matter to berth. Paths are relative to the host root.
// Adding a distribution is one Layout value in the table below.
type Layout struct {
	Runtime Runtime `json:"runtime"`
	// Config is the runtime's main config file as the runtime reads it.
	Config string `json:"config"`
	// Template is the file the distribution renders Config from, if any.
	// TemplateV3 is the one used with containerd 2.x (config version 3).
	Template   string `json:"template,omitempty"`
	TemplateV3 string `json:"templateV3,omitempty"`
	// DropInDir is the directory loaded automatically or through imports.
	DropInDir string `json:"dropInDir,omitempty"`
	DropIn    DropIn `json:"dropIn"`
	Socket    string `json:"socket"`
	// Units are the systemd units that run the runtime, in order of
	// preference (the first active one is restarted).
	Units []string `json:"units"`
	// Markers are files or directories whose presence betrays the
	// distribution on a host (used by discovery).
	Markers []string `json:"markers,omitempty"`
}

// Sources: FACTS.md §5, k3s docs "Advanced options: configuring containerd",
// RKE2 docs "containerd configuration template", k0s docs "runtime",
// microk8s docs "configuring containerd", CRI-O crio.conf(5).
//
// An array indexed by Distribution (Custom's entry empty), not a map: a
// composite literal of constants is static data, where a map is built by
// every process's initialisation.
var layouts = [...]Layout{
	Kubeadm: {
		Runtime: Containerd, Config: "etc/containerd/config.toml",
		DropInDir: "etc/containerd/conf.d", DropIn: DropInImports,
		Socket: "run/containerd/containerd.sock", Units: []string{"containerd.service"},
		Markers: []string{"etc/kubernetes/kubelet.conf", "etc/kubernetes/manifests"},
	},
	K3s: {
		Runtime: Containerd, Config: "var/lib/rancher/k3s/agent/etc/containerd/config.toml",
		Template:   "var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl",
		TemplateV3: "var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl",
		DropIn:     DropInTemplate,
		Socket:     "run/k3s/containerd/containerd.sock", Units: []string{"k3s.service", "k3s-agent.service"},
		Markers: []string{"etc/rancher/k3s", "var/lib/rancher/k3s"},
	},
	RKE2: {
		Runtime: Containerd, Config: "var/lib/rancher/rke2/agent/etc/containerd/config.toml",
		Template:   "var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl",
		TemplateV3: "var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl",
		DropIn:     DropInTemplate,
		Socket:     "run/k3s/containerd/containerd.sock", Units: []string{"rke2-server.service", "rke2-agent.service"},
		Markers: []string{"etc/rancher/rke2", "var/lib/rancher/rke2"},
	},
	K0s: {
		Runtime: Containerd, Config: "etc/k0s/containerd.toml",
		DropInDir: "etc/k0s/containerd.d", DropIn: DropInDirectory,
		Socket: "run/k0s/containerd.sock", Units: []string{"k0scontroller.service", "k0sworker.service"},
		Markers: []string{"etc/k0s", "var/lib/k0s"},
	},
	MicroK8s: {
		Runtime: Containerd, Config: "var/snap/microk8s/current/args/containerd.toml",
		Template: "var/snap/microk8s/current/args/containerd-template.toml",
		DropIn:   DropInTemplate,
		Socket:   "var/snap/microk8s/common/run/containerd.sock", Units: []string{"snap.microk8s.daemon-containerd.service"},
		Markers: []string{"var/snap/microk8s"},
	},
	AKS: {
		Runtime: Containerd, Config: "etc/containerd/config.toml",
		DropInDir: "etc/containerd/conf.d", DropIn: DropInImports,
		Socket: "run/containerd/containerd.sock", Units: []string{"containerd.service"},
		Markers: []string{"etc/default/kubelet", "var/lib/waagent"},
	},
	OpenShift: {
		Runtime: CRIO, Config: "etc/crio/crio.conf",
		DropInDir: "etc/crio/crio.conf.d", DropIn: DropInDirectory,
		Socket: "run/crio/crio.sock", Units: []string{"crio.service"},
		Markers: []string{"etc/crio", "etc/machine-config-daemon"},
	},
}

// CustomLayout is the layout of a custom distribution, from the paths the
// user gives (berth config --containerd-config or --crio-config,
// --runtime-unit, --runtime-socket): containerd extended through an
// imports drop-in directory conf.d beside its config, CRI-O through the
// crio.conf.d directory beside its config. Paths are relative to the host
// root (a leading / is dropped); an empty socket means the runtime's usual
// one.
func CustomLayout(rt Runtime, config, socket, unit string) (Layout, error) {
	config = strings.TrimPrefix(path.Clean("/"+config), "/")
	if config == "" || config == "." {
		return Layout{}, fmt.Errorf("custom layout: the runtime's config file is required")
	}
	if unit == "" {
		return Layout{}, fmt.Errorf("custom layout: the runtime's systemd unit is required (it is restarted to load the change)")
	}
	// The unit is restarted over D-Bus and printed in the command that
	// loads the change; the paths go into files and messages: none may
	// carry a line of its own.
	if err := CheckServiceName(unit); err != nil {
		return Layout{}, fmt.Errorf("custom layout: --runtime-unit: %w", err)
	}
	if err := CheckText(config); err != nil {
		return Layout{}, fmt.Errorf("custom layout: --%s-config: %w", rt, err)
	}
	if err := CheckText(socket); err != nil {
		return Layout{}, fmt.Errorf("custom layout: --runtime-socket: %w", err)
	}
	l := Layout{Runtime: rt, Config: config, Units: []string{unit}}
	switch rt {
	case Containerd:
		l.DropIn, l.DropInDir, l.Socket = DropInImports, path.Join(path.Dir(config), "conf.d"), "run/containerd/containerd.sock"
	case CRIO:
		l.DropIn, l.DropInDir, l.Socket = DropInDirectory, config+".d", "run/crio/crio.sock"
	default:
		return Layout{}, fmt.Errorf("custom layout: unknown runtime %q: expected containerd or crio", rt)
	}
	if socket != "" {
		l.Socket = strings.TrimPrefix(path.Clean("/"+socket), "/")
	}
	return l, nil
}

// Layouts returns the runtime layout of every named distribution (not
// custom, whose layout the user gives), keyed by distribution name. The map
// is a copy: callers may not change the table.
func Layouts() map[string]Layout {
	out := make(map[string]Layout, len(layouts))
	for k, v := range layouts {
		if v.Runtime == "" {
			continue
		}
		v.Units = append([]string(nil), v.Units...)
		v.Markers = append([]string(nil), v.Markers...)
		out[Distribution(k).String()] = v
	}
	return out
}
