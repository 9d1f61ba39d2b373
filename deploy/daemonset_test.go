package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/deploy"
	"berth.dev/berth/internal/testkit/testenv"
)

// check is one named posture requirement.
type check struct {
	name string
	ok   bool
}

func report(t *testing.T, what string, checks []check) {
	t.Helper()
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("%s: %s: not so", what, ck.name)
		}
	}
}

// hostMount returns the container's mount of the pod's one hostPath volume
// and that volume, failing if there is more than one hostPath volume.
func hostMount(t *testing.T, pod corev1.PodSpec, c corev1.Container) (*corev1.VolumeMount, *corev1.Volume) {
	t.Helper()
	var vol *corev1.Volume
	for i, v := range pod.Volumes {
		if v.HostPath != nil {
			if vol != nil {
				t.Errorf("more than one hostPath volume: %s and %s", vol.Name, v.Name)
			}
			vol = &pod.Volumes[i]
		}
	}
	for i, m := range c.VolumeMounts {
		if vol != nil && m.Name == vol.Name {
			return &c.VolumeMounts[i], vol
		}
	}
	return nil, vol
}

func envSources(c corev1.Container) map[string]*corev1.EnvVarSource {
	env := map[string]*corev1.EnvVarSource{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom
	}
	return env
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

// agentPosture pins the agent pod's security and scheduling choices (see
// the comment in base/daemonset.yaml) so that a change to any of them is
// deliberate. privileged is overlays/kvm-probe (agent.kvmProbe in the chart).
func agentPosture(t *testing.T, ds appsv1.DaemonSet, serviceAccount, maxUnavailable string, privileged bool) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	mount, vol := hostMount(t, pod, c)
	env := envSources(c)
	checks := []check{
		{"host / mounted at /host", mount != nil && vol.HostPath.Path == "/" && mount.MountPath == "/host"},
		{"host mount read-only and recursive", mount != nil && mount.ReadOnly && mount.RecursiveReadOnly != nil && *mount.RecursiveReadOnly == corev1.RecursiveReadOnlyIfPossible},
		{"read-only root filesystem", sc != nil && isTrue(sc.ReadOnlyRootFilesystem)},
		{"all capabilities dropped", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"only SYS_CHROOT added (for --live)", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_CHROOT"})},
		{"RuntimeDefault seccomp", pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"no host namespaces", !pod.HostPID && !pod.HostNetwork && !pod.HostIPC},
		{"tolerates taints", len(pod.Tolerations) > 0},
		{"runs as the agent's ServiceAccount", pod.ServiceAccountName == serviceAccount},
		{"NODE_NAME from spec.nodeName", env["NODE_NAME"] != nil && env["NODE_NAME"].FieldRef != nil && env["NODE_NAME"].FieldRef.FieldPath == "spec.nodeName"},
		{"rolling update, " + maxUnavailable + " at a time", ds.Spec.UpdateStrategy.RollingUpdate != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String() == maxUnavailable},
		{"liveness on /healthz", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz"},
		{"readiness on /readyz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"metrics port named", slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })},
		{"requests and limits", !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero() && !c.Resources.Limits.Cpu().IsZero() && !c.Resources.Limits.Memory().IsZero()},
		{"agent on the host root", slices.Contains(c.Args, "agent") && slices.Contains(c.Args, "--root=/host")},
	}
	if privileged {
		checks = append(checks, check{"privileged (the live KVM probe)", sc != nil && isTrue(sc.Privileged)})
	} else {
		checks = append(checks,
			check{"not privileged", sc != nil && isFalse(sc.Privileged)},
			check{"no privilege escalation", sc != nil && isFalse(sc.AllowPrivilegeEscalation)})
	}
	report(t, "agent DaemonSet "+ds.Name, checks)
}

// nodeInstallerPosture pins the node-installer's choices (see the comment
// in base/node-installer.yaml). It is privileged by design: it writes the
// host and restarts the runtime through systemd's D-Bus socket. What is
// pinned is that it gets nothing more than that: no host namespaces, no
// added capabilities beyond privileged's, a read-only root filesystem, its
// own ServiceAccount (not the agent's, whose writes the admission policy
// confines), and a rollout of one node at a time gated on readiness.
func nodeInstallerPosture(t *testing.T, ds appsv1.DaemonSet, serviceAccount string) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers and %d init containers, want 1 and 0", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	mount, vol := hostMount(t, pod, c)
	env := envSources(c)
	var mode string
	for _, e := range c.Env {
		if e.Name == "BERTH_NODE_INSTALLER_MODE" {
			mode = e.Value
		}
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	checks := []check{
		{"host / mounted at /host", mount != nil && vol.HostPath.Path == "/" && mount.MountPath == "/host"},
		{"host mount writable, propagation HostToContainer (not Bidirectional)", mount != nil && !mount.ReadOnly && mount.MountPropagation != nil && *mount.MountPropagation == corev1.MountPropagationHostToContainer},
		{"privileged", sc != nil && isTrue(sc.Privileged)},
		{"no capabilities listed (privileged has them; adding more says nothing)", sc != nil && sc.Capabilities == nil},
		{"read-only root filesystem", sc != nil && isTrue(sc.ReadOnlyRootFilesystem)},
		{"no host namespaces (no hostPID: systemd over D-Bus, no nsenter)", !pod.HostPID && !pod.HostNetwork && !pod.HostIPC},
		{"tolerates taints", len(pod.Tolerations) > 0},
		{"system-node-critical", pod.PriorityClassName == "system-node-critical"},
		{"runs as its own ServiceAccount", pod.ServiceAccountName == serviceAccount && !strings.HasSuffix(serviceAccount, "-agent")},
		{"NODE_NAME from spec.nodeName", env["NODE_NAME"] != nil && env["NODE_NAME"].FieldRef != nil && env["NODE_NAME"].FieldRef.FieldPath == "spec.nodeName"},
		{"mode install, in the env teardown patches", mode == "install"},
		{"rolling update, one node at a time", ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType && ru != nil && ru.MaxUnavailable != nil && ru.MaxUnavailable.String() == "1" && (ru.MaxSurge == nil || ru.MaxSurge.IntValue() == 0)},
		{"readiness on /readyz (the rollout's gate)", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"no liveness probe (would kill a runtime restart halfway)", c.LivenessProbe == nil},
		{"requests", !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero()},
		{"node-installer on the host root, live", len(c.Args) > 0 && c.Args[0] == "node-installer" && slices.Contains(c.Args, "--root=/host") && slices.Contains(c.Args, "--live")},
		{"platforms and manifest given", slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--platform=") }) && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--manifest=") })},
	}
	report(t, "node-installer DaemonSet "+ds.Name, checks)
}

// teardownPosture pins the pre-delete hook Job: it only talks to the API
// server, so it gets nothing of the host.
func teardownPosture(t *testing.T, job batchv1.Job, daemonSet string) {
	t.Helper()
	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	checks := []check{
		{"pre-delete hook", job.Annotations["helm.sh/hook"] == "pre-delete"},
		{"no host volumes", !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil })},
		{"no host namespaces", !pod.HostPID && !pod.HostNetwork && !pod.HostIPC},
		{"runs as non-root", pod.SecurityContext != nil && isTrue(pod.SecurityContext.RunAsNonRoot)},
		{"RuntimeDefault seccomp", pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"not privileged, no escalation", sc != nil && isFalse(sc.Privileged) && isFalse(sc.AllowPrivilegeEscalation)},
		{"read-only root filesystem", sc != nil && isTrue(sc.ReadOnlyRootFilesystem)},
		{"all capabilities dropped, none added", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
		{"teardown of the node-installer DaemonSet", slices.Equal(c.Args[:2], []string{"node-installer", "teardown"}) && slices.Contains(c.Args, "--daemonset="+daemonSet)},
		{"no retries", job.Spec.BackoffLimit != nil && *job.Spec.BackoffLimit == 0},
	}
	report(t, "teardown Job "+job.Name, checks)
}

// convert decodes an unstructured object into a typed one, strictly.
func convert[T any](t *testing.T, u *unstructured.Unstructured) T {
	t.Helper()
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(raw, &v); err != nil {
		t.Fatalf("%s: %v", objectKey(u), err)
	}
	return v
}

// podsOf returns every pod template in objs by object, for the
// privilege census.
func podsOf(t *testing.T, objs []*unstructured.Unstructured) map[string]corev1.PodSpec {
	t.Helper()
	pods := map[string]corev1.PodSpec{}
	for _, u := range objs {
		switch u.GetKind() {
		case "DaemonSet":
			pods[objectKey(u)] = convert[appsv1.DaemonSet](t, u).Spec.Template.Spec
		case "Job":
			pods[objectKey(u)] = convert[batchv1.Job](t, u).Spec.Template.Spec
		case "Deployment", "StatefulSet", "Pod", "CronJob", "ReplicaSet":
			t.Errorf("%s: a workload kind the posture tests do not know", objectKey(u))
		}
	}
	return pods
}

// privileged lists the pods in which some container runs privileged.
func privileged(pods map[string]corev1.PodSpec) []string {
	var out []string
	for name, p := range pods {
		for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
			if c.SecurityContext != nil && isTrue(c.SecurityContext.Privileged) {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// TestDaemonSetPosture checks the base's two workloads. They have two
// roles: the agent, which every node runs and which must stay unprivileged
// and read-only, and the node-installer, privileged by design (it installs
// onto the host). The census makes sure the node-installer is the only
// privileged pod, so that privilege never creeps into another workload.
func TestDaemonSetPosture(t *testing.T) {
	testenv.Need(t)
	files, err := deploy.Base.ReadDir("base")
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := deploy.Base.ReadFile("base/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decodeObjects(t, string(raw))...)
	}
	agentPosture(t, convert[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "berth-agent")), "berth-agent", "10%", false)
	nodeInstallerPosture(t, convert[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "berth-node-installer")), "berth-node-installer")
	if got, want := privileged(podsOf(t, objs)), []string{"DaemonSet berth-node-installer"}; !slices.Equal(got, want) {
		t.Errorf("privileged pods in the base: %v, want only %v", got, want)
	}
}

// TestChartPosture checks the chart's workloads with the default values
// and with every value set: the same roles as the base, whatever the
// values say, except that agent.kvmProbe makes the agent privileged as
// overlays/kvm-probe does, and hostNetwork puts every pod, and only the
// network namespace of the host, in the node's network; the
// node-installer's priority class and rollout pace are the values'
// (nodeInstaller.priorityClassName, updateStrategy), still a rolling update
// without a surge.
func TestChartPosture(t *testing.T) {
	testenv.Need(t)
	for _, tc := range []struct {
		name, prefix, maxUnavailable string
		args                         []string
		kvmProbe, hostNetwork        bool
		niPriority, niMaxUnavailable string
	}{
		{"default", "berth", "10%", nil, false, false, "system-node-critical", "1"},
		{"full", "edge", "2", []string{"-f", fullValues}, true, true, "", "25%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeObjects(t, mustRender(t, tc.args...))
			ni := tc.prefix + "-node-installer"
			agent := convert[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", tc.prefix+"-agent"))
			installer := convert[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", ni))
			teardown := convert[batchv1.Job](t, findObject(t, objs, "Job", ni+"-teardown"))
			for name, pod := range map[string]*corev1.PodSpec{"agent": &agent.Spec.Template.Spec, "node-installer": &installer.Spec.Template.Spec, "teardown": &teardown.Spec.Template.Spec} {
				wantDNS := corev1.DNSPolicy("")
				if tc.hostNetwork {
					wantDNS = corev1.DNSClusterFirstWithHostNet
				}
				if pod.HostNetwork != tc.hostNetwork || pod.DNSPolicy != wantDNS {
					t.Errorf("%s: hostNetwork %v, dnsPolicy %q; want %v, %q", name, pod.HostNetwork, pod.DNSPolicy, tc.hostNetwork, wantDNS)
				}
				// The rest of the posture is the base's.
				pod.HostNetwork, pod.DNSPolicy = false, ""
			}
			agentPosture(t, agent, tc.prefix+"-agent", tc.maxUnavailable, tc.kvmProbe)
			ipod, ru := &installer.Spec.Template.Spec, installer.Spec.UpdateStrategy.RollingUpdate
			if ipod.PriorityClassName != tc.niPriority || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != tc.niMaxUnavailable {
				t.Errorf("node-installer: priority class %q, rolling update %+v; want %q, maxUnavailable %s", ipod.PriorityClassName, ru, tc.niPriority, tc.niMaxUnavailable)
			} else {
				// The rest of the posture is the base's.
				ipod.PriorityClassName, ru.MaxUnavailable = "system-node-critical", new(intstr.FromInt32(1))
			}
			nodeInstallerPosture(t, installer, ni)
			teardownPosture(t, teardown, ni)
			want := []string{"DaemonSet " + ni}
			if tc.kvmProbe {
				want = []string{"DaemonSet " + tc.prefix + "-agent", "DaemonSet " + ni}
			}
			if got := privileged(podsOf(t, objs)); !slices.Equal(got, want) {
				t.Errorf("privileged pods: %v, want %v", got, want)
			}
		})
	}
}
