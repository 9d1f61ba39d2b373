package report

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// NFDMaxBytes is the largest feature file Node Feature Discovery reads.
const NFDMaxBytes = 64 << 10

// LabelPrefix is the namespace of berth's labels.
const LabelPrefix = "berth.dev/"

// WriteNFD writes a Node Feature Discovery feature file (features.d
// format: `name=value` lines and `#` comments) with one
// berth.dev/platform.<name>=true|false label per verdict and the key facts,
// plus kata-deploy's TEE label (amd.feature.node.kubernetes.io/snp,
// intel.feature.node.kubernetes.io/tdx) when the TEE is enabled.
// A non-zero expiry adds the `# +expiry-time=` directive, after which NFD
// ignores the file (so a node that stops running berth loses its labels).
func WriteNFD(w io.Writer, r *Report, f *facts.Facts, expiry time.Time) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# berth check: node features for Node Feature Discovery\n")
	fmt.Fprintf(&b, "# facts %s collected %s\n", r.FactsDigest, r.Host.CollectedAt.UTC().Format(time.RFC3339))
	if !expiry.IsZero() {
		fmt.Fprintf(&b, "# +expiry-time=%s\n", expiry.UTC().Format(time.RFC3339))
	}
	tee := "none"
	switch {
	case yes(f.TEE.SNP.KVMSEVSNP):
		tee = "snp"
	case yes(f.TEE.TDX.KVMTDX) && yes(f.TEE.TDX.ModuleInitialized):
		tee = "tdx"
	}
	kvm := f.Devices.KVM != nil && f.Devices.KVM.CreateVM
	fmt.Fprintf(&b, "%stee=%s\n", LabelPrefix, tee)
	// kata-deploy's NodeFeatureRule publishes these for an enabled TEE and
	// its RuntimeClasses select on them; NFD accepts the
	// *.feature.node.kubernetes.io namespaces without configuration, so
	// nodes labelled by berth schedule kata-deploy's classes too.
	if t, err := platform.ParseTEE(tee); err == nil && t.NFDLabel() != "" {
		fmt.Fprintf(&b, "%s=true\n", t.NFDLabel())
	}
	fmt.Fprintf(&b, "%skvm=%t\n", LabelPrefix, kvm)
	if f.Virt.Guest != nil {
		fmt.Fprintf(&b, "%svirt.guest=%t\n", LabelPrefix, *f.Virt.Guest)
	}
	for _, v := range r.Verdicts {
		fmt.Fprintf(&b, "%splatform.%s=%t\n", LabelPrefix, v.Name, v.Status != check.NotReady)
	}
	if b.Len() > NFDMaxBytes {
		return fmt.Errorf("NFD feature file would be %d bytes, over NFD's %d-byte limit: select fewer platforms", b.Len(), NFDMaxBytes)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func yes(b *bool) bool { return b != nil && *b }
