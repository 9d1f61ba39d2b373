package catalog

import (
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func distributionChecks() []check.Check {
	return []check.Check{{
		ID:        "distribution.match",
		Title:     "if the platform matches the host's distribution",
		Why:       "Each distribution keeps its runtime configuration elsewhere (k3s and RKE2 render it from a template); a platform built for another distribution writes a file nobody reads.",
		Reads:     []string{"distribution.name"},
		Platforms: "all",
		Remedies:  []string{"choose the platform for the distribution the host runs (berth check without --platform lists them)"},
		Applies:   check.Always(check.Blocking),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			got, want := f.Distribution.Name, p.Distribution()
			ev := []check.Evidence{check.Ev("distribution.name", got)}
			if len(f.Distribution.Evidence) > 0 {
				ev = append(ev, check.Ev("distribution.evidence", strings.Join(f.Distribution.Evidence, "; ")))
			}
			switch {
			case want.UserLayout():
				return check.Ok("custom distribution: paths given at install", ev...)
			case got == "" && want == platform.DefaultDistribution():
				return check.Ok("no distribution detected: plain containerd (kubeadm layout)", ev...)
			case got == want.String():
				return check.Ok(got, ev...)
			case got == "":
				return check.Failed("no Kubernetes distribution detected, platform is for "+want.String(),
					"choose the kubeadm platform for a plain containerd node, or install "+want.String()+" first", ev...)
			}
			return check.Failed("this host runs "+got+", the platform is for "+want.String(),
				"choose the "+got+" variant of the platform", ev...)
		},
	}, {
		ID:    "distribution.kubelet.timeout",
		Title: "the kubelet's runtimeRequestTimeout against guest pull",
		Why: "With guest pull the image is pulled inside the VM while the kubelet waits for CreateContainer, which it cancels after its " +
			"runtimeRequestTimeout (Kubernetes' default 2m); Kata takes the lesser of that and its create_container_timeout, so a large image " +
			"fails the pod at start. kata-deploy 4.1's installer warns below 600 s (tools/packaging/kata-deploy/binary/src/main.rs, " +
			"SUGGESTED_KUBELET_RUNTIME_REQUEST_TIMEOUT_SECS, when guest pull is configured).",
		Reads:     []string{"kubelet.runtimeRequestTimeout"},
		Platforms: "guest-pull platforms (nydus, or confidential platforms on overlayfs with Kata's forced guest pull)",
		Remedies:  kubeletTimeoutRemedies(),
		Applies:   check.When(check.Warning, func(p platform.Platform) bool { return p.GuestPull() }),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			k := f.Kubelet
			ev := []check.Evidence{check.Ev("kubelet.runtimeRequestTimeout", orDefault(k.RuntimeRequestTimeout, "not set (default "+facts.KubeletDefaultRuntimeRequestTimeout+")"))}
			if k.RuntimeRequestTimeoutSource != "" {
				ev = append(ev, check.Ev("kubelet.runtimeRequestTimeoutSource", k.RuntimeRequestTimeoutSource))
			}
			if u, ok := unknownOf(f, "kubelet.runtimeRequestTimeout"); ok {
				return check.Unsure("cannot tell the kubelet's runtimeRequestTimeout", append(ev, u)...)
			}
			v := orDefault(k.RuntimeRequestTimeout, facts.KubeletDefaultRuntimeRequestTimeout)
			d, err := time.ParseDuration(v)
			if err != nil {
				return check.Unsure("the kubelet's runtimeRequestTimeout "+strconv.Quote(v)+" is not a duration", ev...)
			}
			if d >= kubeletGuestPullTimeout {
				return check.Ok(v+" >= "+kubeletGuestPullTimeout.String(), ev...)
			}
			what := v
			if v == facts.KubeletDefaultRuntimeRequestTimeout {
				what += " (the default)"
			}
			dist := f.Distribution.Name
			if dist == "" {
				dist = p.Distribution().String()
			}
			return check.Warned("kubelet runtimeRequestTimeout "+what+" is under the "+
				strconv.Itoa(int(kubeletGuestPullTimeout/time.Second))+" s kata-deploy suggests for guest pull",
				kubeletTimeoutRemedy(dist, k.RuntimeRequestTimeoutSource), ev...)
		},
	}}
}

// kubeletGuestPullTimeout is the runtimeRequestTimeout kata-deploy 4.1
// suggests under guest pull (SUGGESTED_KUBELET_RUNTIME_REQUEST_TIMEOUT_SECS,
// 10 * 60 s).
const kubeletGuestPullTimeout = 10 * time.Minute

// kubeletTimeoutRemedyByDistribution says, per distribution, which file and
// key set the kubelet's runtimeRequestTimeout and how the kubelet picks it
// up. A function, not a package variable: no shared mutable state.
func kubeletTimeoutRemedyByDistribution(dist string) string {
	switch dist {
	case "k3s", "rke2":
		unit := map[string]string{"k3s": "k3s (k3s-agent on agents)", "rke2": "rke2-server (rke2-agent on agents)"}[dist]
		r := "add runtime-request-timeout=10m to kubelet-arg in /etc/rancher/" + dist + "/config.yaml (or a drop-in /etc/rancher/" + dist +
			"/config.yaml.d/50-kubelet-timeout.yaml with kubelet-arg+: [runtime-request-timeout=10m]"
		if dist == "k3s" {
			// k3s documents a kubelet drop-in directory from v1.32.
			r += "; k3s v1.32+ also takes a KubeletConfiguration drop-in with runtimeRequestTimeout: 10m in /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/"
		}
		return r + ") and restart " + unit
	case "k0s":
		return "set runtimeRequestTimeout: 10m in the values of the node's worker profile in /etc/k0s/k0s.yaml (spec.workerProfiles; the worker runs " +
			"with --profile <name>, else the profile named default), or install the worker with --kubelet-extra-args=--runtime-request-timeout=10m; " +
			"then restart k0sworker"
	case "microk8s":
		return "add --runtime-request-timeout=10m to /var/snap/microk8s/current/args/kubelet and restart MicroK8s (snap restart microk8s)"
	case "openshift":
		return "create a KubeletConfig (machineconfiguration.openshift.io/v1) with spec.kubeletConfig.runtimeRequestTimeout: 10m for the node's " +
			"machine config pool: the Machine Config Operator rewrites /etc/kubernetes/kubelet.conf (an edit by hand is reverted)"
	case "aks":
		return "AKS's custom node configuration has no runtimeRequestTimeout: add --runtime-request-timeout=10m to KUBELET_FLAGS in " +
			"/etc/default/kubelet and restart the kubelet (a node image upgrade or reimage drops it)"
	}
	return "set runtimeRequestTimeout: 10m in /var/lib/kubelet/config.yaml (cluster-wide: the kube-system ConfigMap kubelet-config, " +
		"then kubeadm upgrade node phase kubelet-config) and restart the kubelet"
}

// kubeletTimeoutRemedy is the remedy for a host of dist whose timeout was
// set at source (empty: nowhere, the default applies).
func kubeletTimeoutRemedy(dist, source string) string {
	r := kubeletTimeoutRemedyByDistribution(dist)
	switch {
	case source == "":
		return r
	case strings.HasPrefix(source, "proc/"):
		return "the running kubelet has the flag on its command line (" + source + "): raise it to 10m where its unit passes it, or " + r
	}
	at, _, _ := strings.Cut(source, " ")
	return "raise it to 10m or more at /" + at + ", or " + r
}

// kubeletTimeoutRemedies lists every distribution's remedy for explain.
func kubeletTimeoutRemedies() []string {
	var out []string
	for _, d := range []string{"kubeadm", "k3s", "rke2", "k0s", "microk8s", "openshift", "aks"} {
		out = append(out, d+": "+kubeletTimeoutRemedyByDistribution(d))
	}
	return out
}
