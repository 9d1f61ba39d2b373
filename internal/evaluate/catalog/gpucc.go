package catalog

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// The confidential-computing side of the GPU platforms. Where each value
// comes from is in docs/gpu-cc.md; the registers discovery reads are in
// internal/host/discover/gpucc.go.

// gpuTool is NVIDIA's host tool that reads and sets a GPU's CC and PPCIe
// modes (github.com/NVIDIA/gpu-admin-tools); its flags are from the
// tool's cli/main.py (v2025.10.20).
const gpuTool = "nvidia_gpu_tools.py (NVIDIA/gpu-admin-tools)"

// ccModeRemedy sets the CC mode of the GPUs at addrs.
func ccModeRemedy(addrs []string) string {
	return fmt.Sprintf("set it with NVIDIA's tool: %s --gpu-bdf=%s --set-cc-mode=on --reset-after-cc-mode-switch, "+
		"or label the node nvidia.com/cc.mode=on for the GPU operator's cc-manager", gpuTool, strings.Join(addrs, ","))
}

// ppcieRemedy puts a board's GPUs and NVSwitches in PPCIe mode.
const ppcieRemedy = "set PPCIe mode on every GPU and NVSwitch of the board: " + gpuTool + " --set-ppcie-mode=on --reset-after-ppcie-mode-switch " +
	"(per device, --gpu-bdf=<BDF>), or label the node nvidia.com/cc.mode=ppcie for the GPU operator's cc-manager"

// ccGPUs returns the GPUs a confidential GPU platform passes through: the
// confidential-computing capable NVIDIA GPUs on vfio-pci or, while none
// is bound (gpu.vfio reports that), every capable one. vGPU virtual
// functions have no mode of their own.
func ccGPUs(f *facts.Facts) []facts.GPU {
	var bound, all []facts.GPU
	for _, g := range nvidiaGPUs(f) {
		if !g.ConfidentialCapable || g.PhysFn != "" {
			continue
		}
		all = append(all, g)
		if g.VFIOBound {
			bound = append(bound, g)
		}
	}
	if len(bound) > 0 {
		return bound
	}
	return all
}

// byReason joins "address (reason)" items, naming each reason once:
// "0000:11:00.0, 0000:12:00.0 (missing: ...)".
func byReason(items [][2]string) string {
	var order []string
	addrs := map[string][]string{}
	for _, it := range items {
		if _, ok := addrs[it[1]]; !ok {
			order = append(order, it[1])
		}
		addrs[it[1]] = append(addrs[it[1]], it[0])
	}
	parts := make([]string, len(order))
	for i, r := range order {
		parts[i] = strings.Join(addrs[r], ", ") + " (" + r + ")"
	}
	return strings.Join(parts, "; ")
}

// unknownWhy is the recorded reason a device's fact is unknown. Discovery
// records it per device (gpus[<address>].ccMode): an entry under "gpus"
// itself would make every GPU check unknown.
func unknownWhy(f *facts.Facts, field string) string {
	if r, ok := f.UnknownReason(field); ok {
		return r
	}
	return "not recorded"
}

// ccMinVBIOS are NVIDIA's published minimum VBIOS versions for
// confidential computing, by device id. NVIDIA names one for H100 only:
// "Ensure that the firmware on the H100 is at a minimum version of
// 96.00.5E.00.00" (NVIDIA/nvtrust docs/deployment_guide.md, "Validating
// State and Versions"). H100 ids are those of FACTS.md §4 (pci.ids).
var ccMinVBIOS = []struct {
	model, min, source string
	ids                []string
}{{
	model:  "H100",
	min:    "96.00.5e.00.00",
	source: "NVIDIA nvtrust deployment guide",
	ids:    []string{"2313", "2321", "2330", "2331", "2336", "2337", "2338", "2339", "233d"},
}}

// minVBIOS returns the minimum for device id, its model and source.
func minVBIOS(id string) (min, model, source string, ok bool) {
	for _, m := range ccMinVBIOS {
		if slices.Contains(m.ids, id) {
			return m.min, m.model, m.source, true
		}
	}
	return "", "", "", false
}

// compareVBIOS compares two VBIOS versions of five dot-separated hex
// fields ("96.00.5e.00.01"); ok is false when either is not one.
func compareVBIOS(a, b string) (cmp int, ok bool) {
	fa, fb := strings.Split(a, "."), strings.Split(b, ".")
	if len(fa) != 5 || len(fb) != 5 {
		return 0, false
	}
	for i := range fa {
		x, err1 := strconv.ParseUint(fa[i], 16, 8)
		y, err2 := strconv.ParseUint(fb[i], 16, 8)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		if x != y {
			if x < y {
				return -1, true
			}
			return 1, true
		}
	}
	return 0, true
}

func gpuCCChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:    "gpu.cc.mode",
		Title: "if the GPU is in confidential-computing mode",
		Why: "A GPU passed into a confidential VM must have its confidential-computing mode on (or protected PCIe, PPCIe, on " +
			"NVSwitch boards): with CC off the guest driver refuses the GPU or the pod runs with an unprotected GPU. The mode " +
			"is a setting of the GPU's firmware, read from its BAR0 register as NVIDIA's gpu-admin-tools read it; devtools " +
			"mode works but turns the GPU's protections off for debugging.",
		Parent:    "gpu.confidential",
		Reads:     []string{"gpus"},
		Platforms: "confidential gpu platforms",
		Remedies: []string{
			"CC off: " + ccModeRemedy([]string{"<BDF>"}),
			"devtools: the same with --set-cc-mode=on (devtools is for debugging, not production)",
			"unknown: run berth check as root on the node (the mode is read from BAR0 with --probe), or snapshot it with berth snapshot --probe",
		},
		Applies: check.When(check.Blocking, isConfidentialGPU),
		Run: func(f *facts.Facts) check.Result {
			var on, off, dev []string
			var unknown [][2]string
			for _, g := range ccGPUs(f) {
				switch {
				case g.PPCIeMode == "on":
					on = append(on, g.Address+" (PPCIe)")
				case g.CCMode == "on":
					on = append(on, g.Address)
				case g.CCMode == "devtools":
					dev = append(dev, g.Address)
				case g.CCMode == "off":
					off = append(off, g.Address)
				default:
					unknown = append(unknown, [2]string{g.Address, unknownWhy(f, "gpus["+g.Address+"].ccMode")})
				}
			}
			ev := []check.Evidence{check.Ev("gpus.ccMode", ccModes(f))}
			switch {
			case len(off) > 0:
				return check.Failed("CC mode off on "+strings.Join(off, ", ")+": set it with NVIDIA's tool, or label the node nvidia.com/cc.mode=on for cc-manager",
					ccModeRemedy(off), ev...)
			case len(unknown) > 0:
				return check.Unsure("cannot tell the CC mode of "+byReason(unknown), ev...)
			case len(dev) > 0:
				return check.Warned("CC mode devtools on "+strings.Join(dev, ", ")+": the GPU's protections are off for debugging, not for production",
					strings.Replace(ccModeRemedy(dev), "or label", "after debugging; or label", 1), ev...)
			case len(on) == 0:
				return check.Unsure("no confidential-computing capable GPU to judge", ev...)
			}
			return check.Ok("CC mode on: "+strings.Join(on, ", "), ev...)
		},
	}, {
		ID:    "gpu.cc.ppcie",
		Title: "if an NVSwitch board is in protected PCIe mode",
		Why: "On HGX boards the GPUs talk over NVSwitches. A confidential VM with several GPUs needs protected PCIe (PPCIe) mode " +
			"on every GPU and every NVSwitch of the board; a board where some are in PPCIe mode and some are not boots neither way.",
		Parent:    "gpu.cc.mode",
		Reads:     []string{"gpus", "nvswitches"},
		Platforms: "confidential gpu platforms",
		Remedies:  []string{ppcieRemedy},
		Applies:   check.When(check.Blocking, isConfidentialGPU),
		Run: func(f *facts.Facts) check.Result {
			var switches []facts.NVSwitch
			for _, s := range f.NVSwitches {
				if s.Generation == "ls10" {
					switches = append(switches, s)
				}
			}
			if len(switches) == 0 {
				return check.Ok("no NVSwitch with PPCIe: each GPU is passed through on its own in CC mode", check.Ev("nvswitches", len(f.NVSwitches)))
			}
			var on, off, gpuModes, switchModes []string
			var unknown [][2]string
			note := func(addr, mode, field string) {
				if strings.HasPrefix(addr, "NVSwitch ") {
					switchModes = append(switchModes, strings.TrimPrefix(addr, "NVSwitch ")+"="+orDefault(mode, "unknown"))
				} else {
					gpuModes = append(gpuModes, addr+"="+orDefault(mode, "unknown"))
				}
				switch mode {
				case "on":
					on = append(on, addr)
				case "off":
					off = append(off, addr)
				default:
					unknown = append(unknown, [2]string{addr, unknownWhy(f, field)})
				}
			}
			for _, g := range ccGPUs(f) {
				note(g.Address, g.PPCIeMode, "gpus["+g.Address+"].ccMode")
			}
			for _, s := range switches {
				note("NVSwitch "+s.Address, s.PPCIeMode, "nvswitches["+s.Address+"].ppcieMode")
			}
			ev := []check.Evidence{check.Ev("gpus.ppcieMode", gpuModes), check.Ev("nvswitches.ppcieMode", switchModes)}
			switch {
			case len(unknown) > 0:
				return check.Unsure("cannot tell the PPCIe mode of "+byReason(unknown), ev...)
			case len(on) > 0 && len(off) > 0:
				return check.Failed("PPCIe mode on for "+strings.Join(on, ", ")+" but off for "+strings.Join(off, ", ")+
					": every GPU and NVSwitch of the board must be in the same mode", ppcieRemedy, ev...)
			case len(on) == 0:
				return check.Warned(fmt.Sprintf("PPCIe off on the %d NVSwitches and their GPUs: each GPU can go to a confidential VM on its own (CC mode), "+
					"but not several GPUs to one VM over NVLink", len(switches)), ppcieRemedy, ev...)
			}
			return check.Ok(fmt.Sprintf("PPCIe on for %d GPUs and %d NVSwitches", len(on)-len(switches), len(switches)), ev...)
		},
	}, {
		ID:    "gpu.cc.vbios",
		Title: "if the GPU's VBIOS supports confidential computing",
		Why: "NVIDIA names a minimum VBIOS for confidential computing on H100 (96.00.5E.00.00, nvtrust deployment guide); " +
			"an older VBIOS cannot attest or run in CC mode. The kernel shows the version only while the nvidia driver owns " +
			"the GPU (/proc/driver/nvidia/gpus/<BDF>/information, as nvidia-smi -q), so on vfio-pci it is unknown.",
		Parent:    "gpu.confidential",
		Reads:     []string{"gpus"},
		Platforms: "confidential gpu platforms",
		Remedies: []string{
			"update the GPU's firmware with NVIDIA's firmware update package for the board (nvfwupd or the OEM's), then reset the GPU",
			"unknown on vfio-pci: read it with nvidia-smi -q | grep VBIOS while the nvidia driver owns the GPU",
		},
		Applies: check.When(check.Blocking, isConfidentialGPU),
		Run: func(f *facts.Facts) check.Result {
			var old, okv []string
			var unknown [][2]string
			for _, g := range ccGPUs(f) {
				min, model, source, known := minVBIOS(g.DeviceID)
				if !known {
					unknown = append(unknown, [2]string{g.Address, "NVIDIA publishes no minimum VBIOS for 10de:" + g.DeviceID})
					continue
				}
				switch {
				case g.VBIOS == "" && g.Driver != "nvidia":
					unknown = append(unknown, [2]string{g.Address, "on " + orDefault(g.Driver, "no driver") + "; only the nvidia driver reports the VBIOS version"})
					continue
				case g.VBIOS == "":
					unknown = append(unknown, [2]string{g.Address, unknownWhy(f, "gpus["+g.Address+"].vbios")})
					continue
				}
				switch c, ok := compareVBIOS(g.VBIOS, min); {
				case !ok:
					unknown = append(unknown, [2]string{g.Address, "VBIOS " + g.VBIOS + " is not five hex fields"})
				case c < 0:
					old = append(old, fmt.Sprintf("%s VBIOS %s < %s (%s minimum, %s)", g.Address, g.VBIOS, min, model, source))
				default:
					okv = append(okv, g.Address+" VBIOS "+g.VBIOS+" >= "+min)
				}
			}
			ev := []check.Evidence{check.Ev("gpus.vbios", vbiosList(f))}
			switch {
			case len(old) > 0:
				return check.Failed(strings.Join(old, "; "), "update the GPU's firmware (VBIOS) to NVIDIA's minimum for confidential computing or later, then reset the GPU", ev...)
			case len(unknown) > 0:
				return check.Unsure("cannot tell the VBIOS of "+byReason(unknown), ev...)
			}
			return check.Ok(strings.Join(okv, ", "), ev...)
		},
	}, {
		ID:    "gpu.podresources",
		Title: "for the kubelet's pod-resources socket",
		Why: "Kata's GPU runtime classes cold-plug the GPU a pod was given: the shim asks the kubelet's pod-resources API " +
			"(<kubelet root>/pod-resources/kubelet.sock, pod_resource_api_sock in the Kata configuration) which devices the " +
			"device plugin allocated. The kubelet root is the distribution's (k0s: /var/lib/k0s/kubelet); without the socket " +
			"the sandbox starts without its GPU.",
		Parent:    "gpu.present",
		Reads:     []string{"distribution"},
		Platforms: "gpu platforms",
		Remedies: []string{
			"start the kubelet (it creates the socket; kubelets older than 1.34 need the KubeletPodResourcesGet feature gate), " +
				"and if it runs with another --root-dir, point pod_resource_api_sock of the Kata configuration at that socket",
		},
		Applies: check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			d := f.Distribution
			ev := []check.Evidence{check.Ev("distribution.podResourcesSocket", d.PodResourcesSocket), check.Ev("distribution.podResourcesPresent", d.PodResourcesPresent)}
			switch {
			case d.PodResourcesSocket == "":
				return check.Unsure("no Kubernetes distribution recognised: cannot tell where the kubelet keeps its pod-resources socket", ev...)
			case !d.PodResourcesPresent:
				return check.Failed("no kubelet pod-resources socket at "+d.PodResourcesSocket+" ("+d.Name+"'s kubelet root): Kata cannot cold-plug the pod's GPU",
					"start the kubelet, which creates "+d.PodResourcesSocket+" (kubelets older than 1.34 need the KubeletPodResourcesGet feature gate); "+
						"with another --root-dir, point pod_resource_api_sock of the Kata configuration at its socket", ev...)
			}
			return check.Ok(d.PodResourcesSocket, ev...)
		},
	}, {
		ID:    "gpu.cdi",
		Title: "if containerd passes CDI devices on",
		Why: "NVIDIA's sandbox device plugin writes the GPUs' CDI specification (/var/run/cdi/nvidia.yaml) and the kubelet hands the " +
			"CDI devices a device plugin allocates to the runtime. containerd 1.7 ignores them unless the CRI plugin's enable_cdi is true " +
			"(its built-in default is false); containerd 2.x turns CDI on by default. kata-deploy 4.1 does not set it, and NVIDIA validates " +
			"its GPU stack on containerd 2.x. It is judged once a GPU is on vfio-pci: the device plugin advertises, and writes CDI devices " +
			"for, only GPUs that vfio-pci owns.",
		Parent:    "gpu.vfio",
		Reads:     []string{"runtimes.containerd.version", "runtimes.containerd.cdiEnabled"},
		Platforms: "gpu platforms on containerd (warning)",
		Remedies:  []string{cdiRemedy},
		Applies: func(p platform.Platform) (check.Severity, bool) {
			return check.Warning, isGPU(p) && isContainerd(p)
		},
		Run: func(f *facts.Facts) check.Result {
			c := f.Runtimes.Containerd
			if c == nil {
				return check.Unsure("containerd not found: cannot tell whether it passes CDI devices on")
			}
			ev := []check.Evidence{check.Ev("runtimes.containerd.version", c.Version), check.Ev("runtimes.containerd.cdiEnabled", c.CDIEnabled)}
			v, ok := parseVersion(c.Version)
			switch {
			case !ok:
				return check.Unsure("containerd version not known: cannot tell its CDI default", ev...)
			case !v.atLeast(1, 7):
				return check.Warned("containerd "+v.String()+" has no CDI support (enable_cdi came with 1.7)",
					"upgrade containerd to 2.x, which turns CDI on by default", ev...)
			case c.CDIEnabled != nil && !*c.CDIEnabled:
				return check.Warned("containerd "+v.String()+"'s CRI plugin sets enable_cdi = false: containerd ignores the GPU's CDI devices", cdiRemedy, ev...)
			case c.CDIEnabled != nil:
				return check.Ok("containerd "+v.String()+": enable_cdi = true", ev...)
			case !v.atLeast(2):
				return check.Warned("containerd "+v.String()+" leaves CDI off unless enable_cdi = true, and no configuration file sets it: containerd ignores the GPU's CDI devices",
					cdiRemedy, ev...)
			}
			return check.Ok("containerd "+v.String()+": CDI on by default", ev...)
		},
	}, {
		ID:    "gpu.cdi.spec",
		Title: "for a CDI specification of the passthrough GPUs",
		Why: "The runtime turns a CDI device the device plugin allocates (nvidia.com/pgpu=0) into the GPU's /dev/vfio nodes " +
			"through the CDI specification of its kind, read from /etc/cdi or /var/run/cdi; without one the container fails " +
			"to start (\"unresolvable CDI devices\"). NVIDIA's sandbox device plugin writes nvidia.com-pgpu.yaml for the GPUs " +
			"vfio-pci owns (and nvidia.com/nvswitch for NVSwitches); nvidia-ctk's nvidia.com/gpu is for GPUs on the nvidia driver.",
		Parent:    "gpu.vfio",
		Reads:     []string{"cdiSpecs", "nvswitches"},
		Platforms: "gpu platforms (warning)",
		Remedies:  []string{cdiSpecRemedy},
		Applies:   check.When(check.Warning, isGPU),
		Run: func(f *facts.Facts) check.Result {
			var pass, other, broken []string
			switches := false
			for _, sp := range f.CDISpecs {
				vendor, class, _ := strings.Cut(sp.Kind, "/")
				switch {
				case sp.Error != "":
					broken = append(broken, sp.Error)
				case vendor != "nvidia.com":
				case class == "nvswitch":
					switches = true
				case class == "gpu":
					other = append(other, sp.Kind+" ("+sp.Path+")")
				default:
					// nvidia.com/pgpu, or the per-model class the plugin
					// takes from P_GPU_ALIAS.
					pass = append(pass, sp.Kind+" ("+sp.Path+")")
				}
			}
			ev := []check.Evidence{check.Ev("cdiSpecs", cdiKinds(f))}
			needSwitches := false
			for _, sw := range f.NVSwitches {
				needSwitches = needSwitches || sw.Generation == "ls10"
			}
			switch {
			case len(pass) == 0 && len(other) > 0:
				return check.Warned("only "+strings.Join(other, ", ")+", nvidia-ctk's specification for GPUs on the nvidia driver: none of kind nvidia.com/pgpu for the GPUs on vfio-pci",
					cdiSpecRemedy, ev...)
			case len(pass) == 0 && len(broken) > 0:
				return check.Warned("no CDI specification for NVIDIA's passthrough GPUs; unreadable: "+strings.Join(broken, "; "), cdiSpecRemedy, ev...)
			case len(pass) == 0:
				return check.Warned("no CDI specification for NVIDIA's passthrough GPUs (kind nvidia.com/pgpu) in /etc/cdi or /var/run/cdi", cdiSpecRemedy, ev...)
			case needSwitches && !switches:
				return check.Warned(strings.Join(pass, ", ")+" but no nvidia.com/nvswitch: a VM gets the GPUs of the NVSwitch board, not its NVSwitches (PPCIe needs both)",
					cdiSpecRemedy, ev...)
			}
			return check.Ok(strings.Join(pass, ", "), ev...)
		},
	}, {
		ID:    "gpu.guest.image",
		Title: "for NVIDIA's guest kernel and image",
		Why: "A GPU passed into the VM needs NVIDIA's guest driver, which only Kata's NVIDIA guest kernel (vmlinuz-nvidia-gpu) and " +
			"image carry; kata-deploy 4.1's nvidia-gpu shims and berth's +gpu configuration boot them. A +gpu handler whose " +
			"configuration (with its config.d drop-ins) boots the plain or confidential image starts the pod without a usable GPU.",
		Parent:    "gpu.present",
		ReadsFor:  runtimeReads("handlers"),
		Platforms: "gpu platforms",
		Remedies:  []string{"point the handler at a configuration that boots NVIDIA's guest kernel and image (as berth config and kata-deploy's nvidia-gpu shims write it), or remove the config.d drop-in that replaces them"},
		Applies:   check.When(check.Blocking, isGPU),
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			h := platformHandler(f, p)
			if h == nil {
				return check.Ok("the platform's handler is not configured yet: berth config writes NVIDIA's guest kernel and image")
			}
			if h.Kata == nil {
				return check.Unsure("handler " + h.Name + " names no Kata configuration (ConfigPath): cannot tell which guest it boots")
			}
			g := h.Kata
			imgKey, img := "image", g.Image
			if img == "" && g.Initrd != "" {
				imgKey, img = "initrd", g.Initrd
			}
			ev := []check.Evidence{check.Ev(runtimeField(p)+".handlers."+h.Name+".kata", []string{"kernel " + orDefault(path.Base(g.Kernel), "(none)"), imgKey + " " + orDefault(path.Base(img), "(none)")})}
			if g.Error != "" {
				return check.Unsure("handler "+h.Name+"'s Kata configuration: "+g.Error, ev...)
			}
			kernel, image, _ := p.GPUGuest()
			var bad, odd []string
			for _, c := range []struct{ what, got, want string }{{"kernel", g.Kernel, kernel}, {imgKey, img, image}} {
				switch base := path.Base(c.got); {
				case c.got == "":
					bad = append(bad, "no "+c.what)
				case base == c.want:
				case !strings.Contains(base, "nvidia"):
					bad = append(bad, c.what+" "+base)
				default:
					odd = append(odd, c.what+" "+base)
				}
			}
			want := kernel + " and " + image + " (Kata 4.1's " + p.TemplateShim() + ")"
			remedy := "point the handler at a configuration that boots " + want + ", as berth config writes it; or remove the config.d drop-in that replaces them"
			switch {
			case len(bad) > 0:
				return check.Failed("handler "+h.Name+" boots a guest without NVIDIA's driver: "+strings.Join(bad, ", ")+" (from "+h.ConfigPath+")", remedy, ev...)
			case len(odd) > 0:
				return check.Warned("handler "+h.Name+" boots "+strings.Join(odd, ", ")+", not "+want, remedy, ev...)
			}
			return check.Ok("handler "+h.Name+" boots "+kernel+" and "+image, ev...)
		},
	}})
}

// cdiSpecRemedy says who writes the passthrough GPUs' CDI specification.
// Kept under the report's 256 characters.
const cdiSpecRemedy = "deploy NVIDIA's GPU Operator with sandbox workloads: its sandbox device plugin writes /var/run/cdi/nvidia.com-pgpu.yaml " +
	"(nvidia-ctk cdi generate writes nvidia.com/gpu, for GPUs on the nvidia driver only)"

// cdiKinds renders the CDI specification files for evidence.
func cdiKinds(f *facts.Facts) []string {
	out := make([]string, 0, len(f.CDISpecs))
	for _, sp := range f.CDISpecs {
		out = append(out, sp.Path+"="+orDefault(sp.Kind, "unreadable"))
	}
	return out
}

// cdiRemedy turns containerd's CDI on. The key sits in the CRI plugin of
// the config's version (containerd 1.7's config default prints it there,
// as false, beside cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"], where
// NVIDIA's device plugin writes). Kept under the report's 256 characters.
const cdiRemedy = "set enable_cdi = true under [plugins.\"io.containerd.grpc.v1.cri\"] (config version 2; " +
	"[plugins.\"io.containerd.cri.v1.runtime\"] in version 3) and restart containerd, or upgrade to containerd 2.x, where CDI is on by default"

// ccModes renders every GPU's CC mode for evidence.
func ccModes(f *facts.Facts) []string {
	var out []string
	for _, g := range ccGPUs(f) {
		m := orDefault(g.CCMode, "unknown")
		if g.PPCIeMode == "on" {
			m = "ppcie"
		}
		out = append(out, g.Address+"="+m)
	}
	return out
}

// vbiosList renders every GPU's VBIOS for evidence.
func vbiosList(f *facts.Facts) []string {
	var out []string
	for _, g := range ccGPUs(f) {
		out = append(out, g.Address+"="+orDefault(g.VBIOS, "unknown"))
	}
	return out
}
