package nodeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// The extended resources of the TEE keys, as kata-deploy 4.1's
// RuntimeClasses request them (overhead.podFixed, one per sandbox) and
// its NodeFeatureRule has node-feature-discovery advertise them: a node
// advertised by berth serves kata-deploy's RuntimeClasses, and the
// reverse.
const (
	// ResourceSNPKeys counts the SEV-SNP guests the node can run at once:
	// its encrypted-state ASIDs.
	ResourceSNPKeys corev1.ResourceName = "sev-snp.amd.com/esids"
	// ResourceTDXKeys counts the TDs the node can run at once: its TDX
	// private KeyIDs usable by guests.
	ResourceTDXKeys corev1.ResourceName = "tdx.intel.com/keys"
)

// TEEKeyResource is the extended resource of a TEE's keys ("" for none).
func TEEKeyResource(t platform.TEE) corev1.ResourceName {
	return corev1.ResourceName(t.KeyResource())
}

// TEEKeys is what the node-installer found about one TEE's keys: their
// count, or why it is unknown (then nothing is advertised).
type TEEKeys struct {
	Resource corev1.ResourceName `json:"resource"`
	// Count is the number of keys (0 when unknown).
	Count int64 `json:"count,omitempty"`
	// Reason says why the count is unknown ("" when known).
	Reason string `json:"reason,omitempty"`
}

// CountTEEKeys reads the keys of TEE t from the host's facts.
//
// SEV-SNP: the ASID range KVM printed for SEV-SNP guests ("SEV-SNP
// enabled (ASIDs 1 - 99)"), all of it: SNP guests use encrypted-state
// ASIDs, the count KVM gives the misc cgroup as sev_es and NFD reads as
// cpu.security.sev.encrypted_state_ids. It needs kvm_amd's sev_snp on.
//
// TDX: the private KeyID range the BIOS reserved, less one. The kernel
// keeps the first TDX KeyID as the TDX module's global KeyID (it protects
// the module's metadata), so guests get the rest: what KVM gives the misc
// cgroup as tdx and NFD reads as cpu.security.tdx.total_keys. It needs
// kvm_intel's tdx on and the TDX module initialised.
func CountTEEKeys(f *facts.Facts, t platform.TEE) TEEKeys {
	k := TEEKeys{Resource: TEEKeyResource(t)}
	unknown := func(why string) TEEKeys { k.Reason = why; return k }
	if f == nil {
		return unknown("no host facts")
	}
	switch t {
	case platform.SNP:
		snp := f.TEE.SNP
		switch {
		case snp.KVMSEVSNP == nil:
			return unknown("kvm_amd's sev_snp parameter is unknown (kvm_amd not loaded?)")
		case !*snp.KVMSEVSNP:
			return unknown("kvm_amd's sev_snp is off: SEV-SNP is not enabled")
		case snp.SNPASIDs == nil:
			return unknown("the boot log gives no SEV-SNP ASID range (SEV-SNP not enabled, or no boot log)")
		}
		k.Count = int64(snp.SNPASIDs.Max - snp.SNPASIDs.Min + 1)
	case platform.TDX:
		tdx := f.TEE.TDX
		switch {
		case tdx.KVMTDX == nil:
			return unknown("kvm_intel's tdx parameter is unknown (kvm_intel not loaded?)")
		case !*tdx.KVMTDX:
			return unknown("kvm_intel's tdx is off: TDX is not enabled")
		case tdx.ModuleInitialized == nil || !*tdx.ModuleInitialized:
			return unknown("the TDX module is not initialised")
		case tdx.BIOSKeyIDs == nil:
			return unknown("the boot log gives no TDX private KeyID range (TDX off in the BIOS, or no boot log)")
		}
		// The first KeyID is the TDX module's global KeyID.
		k.Count = int64(tdx.BIOSKeyIDs.Max-tdx.BIOSKeyIDs.Min+1) - 1
	default:
		return unknown(fmt.Sprintf("TEE %s has no keys to count", t))
	}
	if k.Count <= 0 {
		return unknown(fmt.Sprintf("the key range gives %d keys", k.Count))
	}
	return k
}

// teeKeys are the TEE keys to advertise after a run that installed
// ready: one entry per TEE among them, with its count or why it is
// unknown; nil when the operator did not ask (AdvertiseTEEKeys).
func (n *Installer) teeKeys(f *facts.Facts, ready []platform.Platform) []TEEKeys {
	if !n.cfg.AdvertiseTEEKeys {
		return nil
	}
	var tees []platform.TEE
	for _, p := range ready {
		if TEEKeyResource(p.TEE()) != "" && !slices.Contains(tees, p.TEE()) {
			tees = append(tees, p.TEE())
		}
	}
	slices.Sort(tees)
	out := make([]TEEKeys, 0, len(tees))
	for _, t := range tees {
		k := CountTEEKeys(f, t)
		if k.Reason != "" {
			n.cfg.Log.Warn("TEE keys not advertised: their count is unknown", "node", n.cfg.NodeName, "resource", string(k.Resource), "reason", k.Reason)
		}
		out = append(out, k)
	}
	return out
}

// ownedCapacity are the Node's status.capacity entries FieldManager's
// applies to the status subresource own: those its next apply removes
// when it leaves them out.
func ownedCapacity(node *corev1.Node) map[corev1.ResourceName]bool {
	owned := map[corev1.ResourceName]bool{}
	for _, mf := range node.ManagedFields {
		if mf.Manager != FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fs struct {
			Status struct {
				Capacity map[string]json.RawMessage `json:"f:capacity"`
			} `json:"f:status"`
		}
		if err := json.Unmarshal(mf.FieldsV1.Raw, &fs); err != nil {
			continue
		}
		for k := range fs.Status.Capacity {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				owned[corev1.ResourceName(name)] = true
			}
		}
	}
	return owned
}

// applyTEEKeys makes the known counts of keys the node's TEE key
// resources in status.capacity (kubelet copies them into allocatable),
// with server-side apply to the status subresource under FieldManager: an
// entry the installer advertised before and no longer wants (the
// platform was dropped, its count became unknown, the operator stopped
// asking, cleanup) is removed by leaving it out, and only the installer's
// own entries are touched. It writes only when the node differs, and
// reports whether it wrote.
func (n *Installer) applyTEEKeys(ctx context.Context, keys []TEEKeys) (bool, error) {
	node, err := n.getNode(ctx)
	if err != nil {
		return false, err
	}
	want := map[corev1.ResourceName]int64{}
	for _, k := range keys {
		if k.Reason == "" {
			want[k.Resource] = k.Count
		}
	}
	owned := ownedCapacity(node)
	differ := false
	for r, c := range want {
		q, ok := node.Status.Capacity[r]
		if !ok || !owned[r] || q.Value() != c {
			differ = true
		}
	}
	for r := range owned {
		if _, ok := want[r]; !ok {
			differ = true
		}
	}
	if !differ {
		return false, nil
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n.cfg.NodeName}}
	if len(want) > 0 {
		capacity := map[string]any{}
		for r, c := range want {
			capacity[string(r)] = strconv.FormatInt(c, 10)
		}
		obj["status"] = map[string]any{"capacity": capacity}
	}
	if _, err := n.dyn.Resource(nodesResource).Apply(ctx, n.cfg.NodeName, &unstructured.Unstructured{Object: obj}, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}, "status"); err != nil {
		return false, fmt.Errorf("advertising the TEE keys in node %s's status: %w", n.cfg.NodeName, err)
	}
	n.cfg.Log.Info("TEE key resources applied", "node", n.cfg.NodeName, "resources", fmt.Sprint(want))
	return true, nil
}
