package nodeinstall

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// fixtureFacts are the facts discovery gathers on a fixture host.
func fixtureFacts(t *testing.T, fixture string) *facts.Facts {
	t.Helper()
	root, err := hostfs.OpenDir(filepath.Join(upstreamtest.RepoRoot(t), "testdata/hosts", fixture))
	if err != nil {
		t.Fatal(err)
	}
	return discover.Run(context.Background(), root, discover.Options{Now: time.Now})
}

// TestCountTEEKeys: the keys come from the boot log's ranges on hosts
// where the TEE is on (SNP: all 99 ASIDs of "SEV-SNP enabled (ASIDs 1 -
// 99)"; TDX: the 32 KeyIDs of [32, 64) less the TDX module's global
// KeyID), and are unknown, with the reason, everywhere else.
func TestCountTEEKeys(t *testing.T) {
	tests := []struct {
		fixture string
		tee     platform.TEE
		count   int64
		reason  string
	}{
		{"snp-genoa-k3s-ready", platform.SNP, 99, ""},
		{"tdx-emr-kubeadm-ready", platform.TDX, 31, ""},
		{"snp-genoa-k3s-ready", platform.TDX, 0, "kvm_intel's tdx parameter is unknown"},
		{"tdx-emr-kubeadm-ready", platform.SNP, 0, "kvm_amd's sev_snp parameter is unknown"},
		{"snp-milan-bios-off", platform.SNP, 0, "SEV-SNP is not enabled"},
		{"snp-asids-all-sev", platform.SNP, 0, "SEV-SNP is not enabled"},
		{"tdx-bios-off", platform.TDX, 0, "TDX"},
		{"tdx-module-not-loaded", platform.TDX, 0, "TDX is not enabled"},
		{"cloud-vm-no-nested", platform.SNP, 0, "unknown"},
		{"cloud-vm-no-nested", platform.TDX, 0, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.tee.String(), func(t *testing.T) {
			k := CountTEEKeys(fixtureFacts(t, tt.fixture), tt.tee)
			if k.Resource != TEEKeyResource(tt.tee) || k.Count != tt.count {
				t.Errorf("%s keys = %+v, want %d", tt.tee, k, tt.count)
			}
			if tt.reason == "" && k.Reason != "" || tt.reason != "" && !strings.Contains(k.Reason, tt.reason) {
				t.Errorf("reason %q, want one containing %q", k.Reason, tt.reason)
			}
		})
	}
	if k := CountTEEKeys(nil, platform.SNP); k.Reason == "" {
		t.Error("no facts gave a count")
	}
	// Parameters on, but no range in the boot log.
	on, off := true, false
	for tee, f := range map[platform.TEE]*facts.Facts{
		platform.SNP: {TEE: facts.TEE{SNP: facts.SNP{KVMSEVSNP: &on}}},
		platform.TDX: {TEE: facts.TEE{TDX: facts.TDX{KVMTDX: &on, ModuleInitialized: &on}}},
	} {
		if k := CountTEEKeys(f, tee); k.Count != 0 || !strings.Contains(k.Reason, "no boot log") {
			t.Errorf("%s without a range: %+v", tee, k)
		}
	}
	if k := CountTEEKeys(&facts.Facts{TEE: facts.TEE{TDX: facts.TDX{KVMTDX: &on, ModuleInitialized: &off}}}, platform.TDX); !strings.Contains(k.Reason, "not initialised") {
		t.Errorf("TDX module failed: %+v", k)
	}
	// A range that leaves no key for guests: the global KeyID alone.
	one := &facts.Facts{TEE: facts.TEE{TDX: facts.TDX{KVMTDX: &on, ModuleInitialized: &on, BIOSKeyIDs: &facts.Range{Min: 64, Max: 64}}}}
	if k := CountTEEKeys(one, platform.TDX); k.Count != 0 || !strings.Contains(k.Reason, "0 keys") {
		t.Errorf("one TDX KeyID: %+v, want none for guests", k)
	}
}

// installerStatusRules are installerRules with the patch of the Node's
// status subresource that advertising TEE keys needs.
var installerStatusRules = append([]rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
}, installerRules[1:]...)

// capacity is the node's status.capacity and resourceVersion.
func capacity(t *testing.T, dyn dynamic.Interface, name string) (corev1.ResourceList, string) {
	t.Helper()
	in := &Installer{cfg: Config{NodeName: name}, dyn: dyn}
	node, err := in.getNode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return node.Status.Capacity, node.ResourceVersion
}

// setCapacity sets status.capacity entries as kubelet (or a device
// plugin) would, as another field manager.
func setCapacity(t *testing.T, dyn dynamic.Interface, name, patch string) {
	t.Helper()
	if _, err := dyn.Resource(nodesResource).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubelet"}, "status"); err != nil {
		t.Fatal(err)
	}
}

// wantCapacity checks the node's TEE key entries (0: absent) and that
// kubelet's entries stayed.
func wantCapacity(t *testing.T, dyn dynamic.Interface, name string, snp, tdx int64) string {
	t.Helper()
	c, rv := capacity(t, dyn, name)
	for r, want := range map[corev1.ResourceName]int64{ResourceSNPKeys: snp, ResourceTDXKeys: tdx} {
		q, ok := c[r]
		if want == 0 && ok || want != 0 && (!ok || q.Value() != want) {
			t.Errorf("%s capacity %s = %v (present %v), want %d", name, r, q.String(), ok, want)
		}
	}
	if q := c[corev1.ResourceCPU]; q.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("%s: kubelet's cpu capacity = %s, want 8", name, q.String())
	}
	return rv
}

// TestApplyTEEKeys: the known counts are advertised on the node's status
// (with the RBAC the chart grants), unknown ones are not, a rerun with the
// same counts writes nothing, and what the installer advertised leaves
// when no longer wanted, while kubelet's capacity stays.
func TestApplyTEEKeys(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	createNode(t, dyn, "ni-teekeys", nil)
	setCapacity(t, dyn, "ni-teekeys", `{"status":{"capacity":{"cpu":"8","memory":"64Gi"}}}`)
	dir := t.TempDir()
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	noRuntime := func(context.Context, platform.Layout) (configure.Runtime, error) { return nil, os.ErrNotExist }
	in, err := New(Config{NodeName: "ni-teekeys", Root: root, Writable: writable(t, dir), Install: configure.Install{Prefix: "/opt/berth"},
		Runtime: noRuntime, AdvertiseTEEKeys: true}, clientAs(t, "berth-node-installer-status-test", installerStatusRules))
	if err != nil {
		t.Fatal(err)
	}

	snp := fixtureFacts(t, "snp-genoa-k3s-ready")
	both := mustPlatforms(t, "k3s-qemu-snp", "k3s-qemu-none", "k3s-qemu-tdx")
	keys := in.teeKeys(snp, both)
	if len(keys) != 2 || keys[0].Resource != ResourceSNPKeys || keys[0].Count != 99 || keys[1].Resource != ResourceTDXKeys || keys[1].Reason == "" {
		t.Fatalf("keys on an SNP host for SNP and TDX platforms: %+v", keys)
	}
	if wrote, err := in.applyTEEKeys(ctx, keys); err != nil || !wrote {
		t.Fatalf("advertising: wrote %v, %v", wrote, err)
	}
	rv := wantCapacity(t, dyn, "ni-teekeys", 99, 0)
	if wrote, err := in.applyTEEKeys(ctx, keys); err != nil || wrote {
		t.Errorf("rerun: wrote %v, %v", wrote, err)
	}
	if rv2 := wantCapacity(t, dyn, "ni-teekeys", 99, 0); rv2 != rv {
		t.Errorf("rerun changed the node: resourceVersion %s -> %s", rv, rv2)
	}

	// The host changes: the TDX count is known too (another host's facts).
	tdx := fixtureFacts(t, "tdx-emr-kubeadm-ready")
	snp.TEE.TDX = tdx.TEE.TDX
	if wrote, err := in.applyTEEKeys(ctx, in.teeKeys(snp, both)); err != nil || !wrote {
		t.Fatalf("advertising both: wrote %v, %v", wrote, err)
	}
	wantCapacity(t, dyn, "ni-teekeys", 99, 31)

	// The SNP platform is dropped: its keys leave, TDX's stay.
	if _, err := in.applyTEEKeys(ctx, in.teeKeys(snp, mustPlatforms(t, "k3s-qemu-tdx"))); err != nil {
		t.Fatal(err)
	}
	wantCapacity(t, dyn, "ni-teekeys", 0, 31)

	// The operator stops asking: the installer's entries leave.
	in.cfg.AdvertiseTEEKeys = false
	if keys := in.teeKeys(snp, both); keys != nil {
		t.Errorf("keys without AdvertiseTEEKeys: %+v", keys)
	}
	if wrote, err := in.applyTEEKeys(ctx, nil); err != nil || !wrote {
		t.Fatalf("withdrawing: wrote %v, %v", wrote, err)
	}
	rv = wantCapacity(t, dyn, "ni-teekeys", 0, 0)
	if wrote, err := in.applyTEEKeys(ctx, nil); err != nil || wrote {
		t.Errorf("withdrawing again: wrote %v, %v", wrote, err)
	}
	if rv2 := wantCapacity(t, dyn, "ni-teekeys", 0, 0); rv2 != rv {
		t.Errorf("withdrawing again changed the node: resourceVersion %s -> %s", rv, rv2)
	}

	// An entry someone else set (NFD with kata-deploy's rule) is not the
	// installer's to remove.
	setCapacity(t, dyn, "ni-teekeys", `{"status":{"capacity":{"sev-snp.amd.com/esids":"99"}}}`)
	if wrote, err := in.applyTEEKeys(ctx, nil); err != nil || wrote {
		t.Errorf("with NFD's entry: wrote %v, %v", wrote, err)
	}
	wantCapacity(t, dyn, "ni-teekeys", 99, 0)
}

// TestTEEKeysFollowInstall runs the node-installer with
// AdvertiseTEEKeys on the TDX fixture: installing a TDX platform
// advertises the node's 31 guest KeyIDs, a rerun writes nothing,
// dropping the platform withdraws them (a platform without TEE has no
// keys), and so does cleanup after another install.
func TestTEEKeysFollowInstall(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	n := newNode(t, "ni-teekeys-tdx", "tdx-emr-kubeadm-ready", "1.7.35")
	n.teeKeys = true
	setCapacity(t, dyn, n.name, `{"status":{"capacity":{"cpu":"8"}}}`)
	both := mustPlatforms(t, "kubeadm-qemu-none", "kubeadm-qemu-tdx")
	rep, err := n.installer(t, both, false).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if len(rep.TEEKeys) != 1 || rep.TEEKeys[0] != (TEEKeys{Resource: ResourceTDXKeys, Count: 31}) || !rep.TEEKeysChanged {
		t.Errorf("report: keys %+v, changed %v", rep.TEEKeys, rep.TEEKeysChanged)
	}
	rv := wantCapacity(t, dyn, n.name, 0, 31)

	rep, err = n.installer(t, both, false).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if rep.TEEKeysChanged || rep.LabelsChanged {
		t.Errorf("rerun wrote: keys %v, labels %v", rep.TEEKeysChanged, rep.LabelsChanged)
	}
	if rv2 := wantCapacity(t, dyn, n.name, 0, 31); rv2 != rv {
		t.Errorf("rerun changed the node: resourceVersion %s -> %s", rv, rv2)
	}

	rep, err = n.installer(t, mustPlatforms(t, "kubeadm-qemu-none"), false).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("dropping TDX: %v", err)
	}
	if len(rep.TEEKeys) != 0 || !rep.TEEKeysChanged {
		t.Errorf("dropping TDX: keys %+v, changed %v", rep.TEEKeys, rep.TEEKeysChanged)
	}
	wantCapacity(t, dyn, n.name, 0, 0)

	if _, err := n.installer(t, both, false).Run(ctx, ModeInstall); err != nil {
		t.Fatalf("install again: %v", err)
	}
	wantCapacity(t, dyn, n.name, 0, 31)
	rep, err = n.installer(t, nil, false).Run(ctx, ModeCleanup)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if !rep.TEEKeysChanged {
		t.Error("cleanup does not report withdrawing the keys")
	}
	wantCapacity(t, dyn, n.name, 0, 0)
}
