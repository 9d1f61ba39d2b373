package discover

import (
	"maps"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// distributionPriority breaks ties between distributions with equally
// strong evidence: the specific ones first, plain kubeadm last, because
// k3s, RKE2 or an AKS node may also carry kubeadm-like files (a leftover
// etc/kubernetes, a kubelet unit) while the reverse is rare.
var distributionPriority = []string{"openshift", "microk8s", "k3s", "rke2", "k0s", "aks", "kubeadm"}

// unitDirs are where systemd unit files live, in systemd's order.
var unitDirs = []string{"etc/systemd/system", "usr/local/lib/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"}

// wantsDirs hold the links that enable a unit at boot.
var wantsDirs = []string{"etc/systemd/system/multi-user.target.wants"}

// genericUnits run a container runtime on any host, Kubernetes or not, so
// they say nothing about the distribution.
var genericUnits = map[string]bool{"containerd.service": true, "crio.service": true}

// kubeletFiles betray a kubelet without naming a distribution.
var kubeletFiles = []string{
	"usr/bin/kubelet", "usr/local/bin/kubelet",
	"etc/systemd/system/kubelet.service", "usr/lib/systemd/system/kubelet.service", "lib/systemd/system/kubelet.service",
}

// kubeadmFiles are kubeadm's own drop-in for the kubelet unit.
var kubeadmFiles = []string{
	"etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
	"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
}

// distEvidence is what was found for one distribution.
type distEvidence struct {
	unit     bool // an enabled unit or a unit file: the distribution is installed
	evidence []string
	// required is false when a distribution's markers alone are not enough
	// (openshift without RHCOS, aks without kubelet), so it is not chosen.
	required bool
}

// detectDistribution recognises the Kubernetes distribution from the
// layout table's markers and units plus a few rules that the table cannot
// express (OpenShift on RHCOS, AKS on Azure). It reads os-release and DMI
// itself: other subsystems fill those sections concurrently.
func detectDistribution(s *session) facts.Distribution {
	layouts := platform.Layouts()
	found := map[string]*distEvidence{}
	for name, l := range layouts {
		e := &distEvidence{required: true}
		for _, m := range l.Markers {
			if s.exists(m) {
				e.evidence = append(e.evidence, "file "+m)
			}
		}
		for _, u := range l.Units {
			if genericUnits[u] {
				continue
			}
			if ev, ok := s.unitEvidence(u); ok {
				e.unit = true
				e.evidence = append(e.evidence, ev)
			}
		}
		found[name] = e
	}

	if e := found["openshift"]; e != nil {
		// etc/crio alone is any CRI-O host; OpenShift is RHCOS or runs the
		// machine-config daemon.
		rhcos := osReleaseID(s) == "rhcos"
		if rhcos {
			e.evidence = append(e.evidence, "os-release ID=rhcos")
		}
		e.required = s.exists("etc/crio") && (rhcos || s.exists("etc/machine-config-daemon"))
	}
	if e := found["aks"]; e != nil {
		e.required = false
		if b, ok := s.readFile("", "etc/default/kubelet"); ok && strings.Contains(strings.ToLower(string(b)), "azure") {
			e.evidence = append(e.evidence, "etc/default/kubelet mentions azure")
			e.required = true
		}
		if s.exists("etc/kubernetes/azure.json") {
			e.evidence = append(e.evidence, "file etc/kubernetes/azure.json")
			e.required = true
		}
		if vendor, ok := s.readString("", "sys/class/dmi/id/sys_vendor"); ok && strings.Contains(vendor, "Microsoft") {
			if k := s.firstExisting(kubeletFiles); k != "" {
				e.evidence = append(e.evidence, "DMI sys_vendor "+vendor, "file "+k)
				e.required = true
			}
		}
	}
	if e := found["kubeadm"]; e != nil {
		if k := s.firstExisting(kubeadmFiles); k != "" {
			e.evidence = append(e.evidence, "file "+k)
		}
	}

	// Candidates in priority order, then any distribution the table gained
	// that the priority list does not name yet.
	order := slices.Clone(distributionPriority)
	for _, name := range slices.Sorted(maps.Keys(layouts)) {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	best := ""
	for _, name := range order {
		e := found[name]
		if e == nil || !e.required || len(e.evidence) == 0 {
			continue
		}
		if best == "" || e.unit && !found[best].unit {
			best = name
		}
	}
	if best == "" {
		return facts.Distribution{}
	}
	return facts.Distribution{Name: best, Evidence: found[best].evidence}
}

// unitEvidence says how unit is installed: enabled through a wants link,
// or present as a unit file.
func (s *session) unitEvidence(unit string) (string, bool) {
	for _, d := range wantsDirs {
		if p := path.Join(d, unit); s.exists(p) {
			return "unit " + unit + " enabled (" + p + ")", true
		}
	}
	for _, d := range unitDirs {
		if p := path.Join(d, unit); s.exists(p) {
			return "unit file " + p, true
		}
	}
	return "", false
}

// firstExisting returns the first of paths that exists, or "".
func (s *session) firstExisting(paths []string) string {
	for _, p := range paths {
		if s.exists(p) {
			return p
		}
	}
	return ""
}

// osReleaseID returns the ID of os-release, or "" when it cannot be read;
// the OS subsystem reports why.
func osReleaseID(s *session) string {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		b, ok := s.readFile("", p)
		if !ok {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ID="); ok {
				return strings.Trim(v, `"'`)
			}
		}
		return ""
	}
	return ""
}
