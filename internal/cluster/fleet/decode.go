package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
)

// DefaultPageSize is how many NodeReports one list request asks for.
const DefaultPageSize = 500

// List reads every NodeReport page by page (limit/continue) through c, a
// client from RESTClient. Each page's items are decoded one by one, so a
// malformed object is reported rather than failing the whole list. The
// next page is fetched while the current one is decoded: at thousands of
// nodes the API server's encoding and the decoding here take about as long
// as each other. pageSize <= 0 means DefaultPageSize.
func List(ctx context.Context, c rest.Interface, pageSize int64) ([]Node, []Malformed, error) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type page struct {
		items []json.RawMessage
		err   error
	}
	pages := make(chan page, 1)
	go func() {
		defer close(pages)
		gvr := v1alpha1.GroupVersionResource
		cont := ""
		for {
			req := c.Get().AbsPath("/apis", gvr.Group, gvr.Version, gvr.Resource).Param("limit", strconv.FormatInt(pageSize, 10))
			if cont != "" {
				req = req.Param("continue", cont)
			}
			raw, err := req.Do(ctx).Raw()
			if err != nil {
				pages <- page{err: fmt.Errorf("listing NodeReports (%s): %w", gvr.String(), err)}
				return
			}
			var p struct {
				Metadata metav1.ListMeta   `json:"metadata"`
				Items    []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				pages <- page{err: fmt.Errorf("listing NodeReports: decoding a page: %w", err)}
				return
			}
			select {
			case pages <- page{items: p.Items}:
			case <-ctx.Done():
				return
			}
			if cont = p.Metadata.Continue; cont == "" {
				return
			}
		}
	}()
	var nodes []Node
	var bad []Malformed
	for p := range pages {
		if p.err != nil {
			return nil, nil, p.err
		}
		for _, it := range p.items {
			n, err := Decode(it)
			if err != nil {
				bad = append(bad, Malformed{Name: n.Name, Reason: err.Error()})
				continue
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, bad, nil
}

// wireReport is the part of a NodeReport object fleet reads: decoding
// into it skips metadata such as managedFields, which is as large as the
// report itself.
type wireReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Report *v1alpha1.Report `json:"report"`
	// Status holds the conditions.
	Status *v1alpha1.NodeReportStatus `json:"status"`
}

// Decode turns the JSON of one NodeReport object into the analysis model,
// or says what is wrong with it (wrong apiVersion or kind, fields of the
// wrong type, missing fields, unknown verdicts); the returned Node then
// carries just the object's name, when it could be read.
func Decode(b []byte) (Node, error) {
	var w wireReport
	if err := json.Unmarshal(b, &w); err != nil {
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(b, &meta)
		return Node{Name: meta.Metadata.Name}, fmt.Errorf("decoding: %w", err)
	}
	name := w.Metadata.Name
	if gv := w.APIVersion; gv != v1alpha1.SchemeGroupVersion.String() {
		return Node{Name: name}, fmt.Errorf("apiVersion %q: expected %s", gv, v1alpha1.SchemeGroupVersion.String())
	}
	if w.Kind != v1alpha1.Kind {
		return Node{Name: name}, fmt.Errorf("kind %q: expected %s", w.Kind, v1alpha1.Kind)
	}
	if w.Report == nil {
		return Node{Name: name}, errors.New("report: missing")
	}
	n, err := FromReport(name, w.Report)
	if err != nil {
		return Node{Name: name}, err
	}
	n.Conditions = conditionsOf(w.Status)
	return n, nil
}

// FromReport builds the analysis model of one report.
func FromReport(name string, r *v1alpha1.Report) (Node, error) {
	switch {
	case r.NodeName == "":
		return Node{}, errors.New("report.nodeName: missing")
	case r.NodeName != name:
		return Node{}, fmt.Errorf("report.nodeName %q: expected the object's name %q", r.NodeName, name)
	case r.ContentHash == "":
		return Node{}, errors.New("report.contentHash: missing")
	}
	n := Node{Name: name, Class: Class(&r.Facts), Facts: Facts(r), Verdicts: make(map[string]string, len(r.Platforms))}
	for i, p := range r.Platforms {
		if p.Name == "" {
			return Node{}, fmt.Errorf("report.platforms[%d].name: missing", i)
		}
		switch p.Verdict {
		case v1alpha1.VerdictReady:
			n.Verdicts[p.Name] = Ready
		case v1alpha1.VerdictWarn:
			n.Verdicts[p.Name] = ReadyWithWarnings
		case v1alpha1.VerdictNotReady:
			n.Verdicts[p.Name] = NotReady
			if p.FirstBlocker != "" {
				if n.BlockedBy == nil {
					n.BlockedBy = map[string]string{}
				}
				n.BlockedBy[p.Name] = p.FirstBlocker
			}
		default:
			return Node{}, fmt.Errorf("report.platforms[%d].verdict %q: expected ready, warn or notReady", i, p.Verdict)
		}
	}
	if in := r.Install; in != nil {
		release := in.Version
		if d, ok := strings.CutPrefix(in.Digest, "sha256:"); ok && len(d) >= 12 {
			release += "@sha256:" + d[:12]
		}
		for i, p := range in.Platforms {
			if p.Name == "" {
				return Node{}, fmt.Errorf("report.install.platforms[%d].name: missing", i)
			}
			var state string
			switch p.State {
			case v1alpha1.InstallInstalled:
				state = Installed
			case v1alpha1.InstallNotReady:
				state = NotReady
			case v1alpha1.InstallFailed:
				state = InstallFailed
			default:
				return Node{}, fmt.Errorf("report.install.platforms[%d].state %q: expected installed, not-ready or failed", i, p.State)
			}
			n.Install = append(n.Install, Install{Platform: p.Name, State: state, Release: release, Error: p.Error})
		}
	}
	return n, nil
}

// Class is the hardware class of a node: CPU vendor and product line (the
// model name when the line is unknown), and the GPU models. Nodes of one
// class are expected to be configured alike.
func Class(f *v1alpha1.FactsSummary) string {
	vendor := f.CPU.Vendor
	switch vendor {
	case "AuthenticAMD":
		vendor = "amd"
	case "GenuineIntel":
		vendor = "intel"
	case "":
		vendor = "unknown-cpu"
	}
	line := f.CPU.ProductLine
	if line == "" {
		line = f.CPU.Model
	}
	c := strings.TrimSpace(vendor + " " + line)
	if f.Virt.Guest {
		c += " (vm)"
	}
	if len(f.GPUs) > 0 {
		models := make([]string, 0, len(f.GPUs))
		seen := map[string]int{}
		for _, g := range f.GPUs {
			if seen[g.Model] == 0 {
				models = append(models, g.Model)
			}
			seen[g.Model]++
		}
		for i, m := range models {
			if seen[m] > 1 {
				models[i] = fmt.Sprintf("%dx %s", seen[m], m)
			}
		}
		c += " / " + strings.Join(models, ", ")
	}
	return c
}

// Facts flattens the facts that matter for consistency into dotted names.
// Absent components are left out (and compare as "" with nodes that have
// them).
func Facts(r *v1alpha1.Report) map[string]string {
	f := &r.Facts
	m := make(map[string]string, 20)
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("kernel.release", f.KernelRelease)
	set("os", f.OS)
	set("distribution", f.Distribution)
	set("containerd.version", f.Runtimes.Containerd)
	set("crio.version", f.Runtimes.CRIO)
	set("qemu.version", f.Hypervisors.QEMU)
	set("cloud-hypervisor.version", f.Hypervisors.CloudHypervisor)
	set("firecracker.version", f.Hypervisors.Firecracker)
	m["tee"] = nodereport.TEE(r)
	if s := f.TEE.SNP; s != nil {
		m["snp.enabled"] = strconv.FormatBool(s.Enabled)
		set("snp.firmware", s.FirmwareVersion)
	}
	if t := f.TEE.TDX; t != nil {
		m["tdx.module.initialized"] = strconv.FormatBool(t.ModuleInitialized)
		set("tdx.module.version", t.ModuleVersion)
	}
	m["kvm.usable"] = strconv.FormatBool(f.KVMUsable)
	m["iommu"] = strconv.FormatBool(f.IOMMUGroups > 0)
	m["module.kvm"] = strconv.FormatBool(f.Modules.KVM)
	m["module.vhost_vsock"] = strconv.FormatBool(f.Modules.VhostVsock)
	m["module.vhost_net"] = strconv.FormatBool(f.Modules.VhostNet)
	m["module.vfio_pci"] = strconv.FormatBool(f.Modules.VFIOPCI)
	vfio := 0
	for _, g := range f.GPUs {
		if g.VFIO {
			vfio++
		}
	}
	if len(f.GPUs) > 0 {
		m["gpu.vfio"] = fmt.Sprintf("%d/%d", vfio, len(f.GPUs))
	}
	set("berth.version", r.BerthVersion)
	gpuFacts(r, m)
	return m
}

// RESTClient returns the client List needs for cfg. The responses are
// decoded by List itself, so the client needs no scheme of types.
func RESTClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	gv := v1alpha1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	c.AcceptContentTypes = "application/json"
	// Uncompressed: gzip of a 35 MB list of 5,000 reports costs the API
	// server more time than sending it over any cluster network.
	c.DisableCompression = true
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	return rc, nil
}
