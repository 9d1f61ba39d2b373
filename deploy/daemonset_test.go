package deploy_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/deploy"
)

// TestDaemonSetPosture pins the agent pod's security and scheduling choices
// (see the comment in base/daemonset.yaml) so that a change to any of them
// is deliberate.
func TestDaemonSetPosture(t *testing.T) {
	raw, err := deploy.Base.ReadFile("base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatalf("base/daemonset.yaml: %v", err)
	}
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	var hostMount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == "/host" {
			hostMount = &c.VolumeMounts[i]
		}
	}
	var hostVol *corev1.Volume
	for i, v := range pod.Volumes {
		if v.HostPath != nil {
			if hostVol != nil {
				t.Errorf("more than one hostPath volume: %s and %s", hostVol.Name, v.Name)
			}
			hostVol = &pod.Volumes[i]
		}
	}
	env := map[string]*corev1.EnvVarSource{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"host / mounted at /host", hostMount != nil && hostVol != nil && hostVol.HostPath.Path == "/" && hostMount.Name == hostVol.Name},
		{"host mount read-only and recursive", hostMount != nil && hostMount.ReadOnly && hostMount.RecursiveReadOnly != nil && *hostMount.RecursiveReadOnly == corev1.RecursiveReadOnlyIfPossible},
		{"not privileged", sc != nil && sc.Privileged != nil && !*sc.Privileged},
		{"no privilege escalation", sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"read-only root filesystem", sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"all capabilities dropped", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"only SYS_CHROOT added (for --live)", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_CHROOT"})},
		{"RuntimeDefault seccomp", pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"no host namespaces", !pod.HostPID && !pod.HostNetwork && !pod.HostIPC},
		{"tolerates every taint", slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
			return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
		})},
		{"runs as the agent's ServiceAccount", pod.ServiceAccountName == "berth-agent"},
		{"NODE_NAME from spec.nodeName", env["NODE_NAME"] != nil && env["NODE_NAME"].FieldRef != nil && env["NODE_NAME"].FieldRef.FieldPath == "spec.nodeName"},
		{"rolling update, 10% at a time", ds.Spec.UpdateStrategy.RollingUpdate != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String() == "10%"},
		{"liveness on /healthz", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz"},
		{"readiness on /readyz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"metrics port named", slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })},
		{"requests and limits", !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero() && !c.Resources.Limits.Cpu().IsZero() && !c.Resources.Limits.Memory().IsZero()},
		{"agent on the host root", slices.Contains(c.Args, "agent") && slices.Contains(c.Args, "--root=/host")},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("DaemonSet: %s: not so", ck.name)
		}
	}
}
