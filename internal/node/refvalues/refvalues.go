package refvalues

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
)

// SchemaVersion identifies the JSON layout of Document. It changes only
// when a field changes meaning or disappears; new optional fields keep it.
const SchemaVersion = "berth.dev/refvalues/v1"

// Component is a boot component (firmware, kernel, initrd) given by path or
// by reader, so that the CLI and the installer can both feed the package.
// The zero Component means "not given".
type Component struct {
	name string
	// open opens the component; limit is the most bytes a component of
	// its kind can have, which a file is held to before it is read.
	open func(limit int64) (io.ReadCloser, error)
}

// File is a component read from a path on disk: a regular file only (a
// FIFO or device is refused unopened, hostfs.OpenRegular), of at most the
// size its kind can have.
func File(path string) Component {
	return Component{name: path, open: func(limit int64) (io.ReadCloser, error) { return hostfs.OpenRegular(path, limit) }}
}

// Reader is a component read once from r; name is used in messages and in
// the inputs section of the output.
func Reader(name string, r io.Reader) Component {
	return Component{name: name, open: func(int64) (io.ReadCloser, error) { return io.NopCloser(r), nil }}
}

// Given reports whether the component was supplied.
func (c Component) Given() bool { return c.open != nil }

// Name is the path or name the component was given with.
func (c Component) Name() string { return c.name }

// Input records a component that went into the values, so that a consumer
// can check it measured what it thinks it measured.
type Input struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// readAll reads the whole component, refusing more than limit bytes.
func (c Component) readAll(what string, limit int64) ([]byte, Input, error) {
	var b []byte
	_, in, err := c.read(what, limit, func(r io.Reader) (err error) {
		b, err = io.ReadAll(r)
		return err
	})
	return b, in, err
}

// hash streams the component through SHA-256 without keeping it, refusing
// more than limit bytes; it returns the first len(head) bytes (fewer in a
// shorter file) for a header check.
func (c Component) hash(what string, limit int64, head []byte) ([32]byte, Input, []byte, error) {
	var n int
	sum, in, err := c.read(what, limit, func(r io.Reader) error {
		var err error
		if n, err = io.ReadFull(r, head); err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		} else if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, r)
		return err
	})
	return sum, in, head[:n], err
}

// read opens the component and hands it to consume, which must read it
// to the end; no more than limit bytes are given, and an empty component
// is refused (no boot component is empty: a file cut short or a wrong
// path). It returns the SHA-256 of what was read.
func (c Component) read(what string, limit int64, consume func(io.Reader) error) ([32]byte, Input, error) {
	var sum [32]byte
	tooLarge := func() error {
		return fmt.Errorf("%s %s is larger than %d bytes, the most a %s can have", what, c.name, limit, what)
	}
	rc, err := c.open(limit)
	if errors.Is(err, hostfs.ErrTooLarge) {
		return sum, Input{}, tooLarge()
	} else if err != nil {
		return sum, Input{}, fmt.Errorf("opening %s %s: %w", what, c.name, err)
	}
	defer rc.Close()
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(hostfs.LimitedReader(rc, limit), h)}
	if err := consume(cr); errors.Is(err, hostfs.ErrTooLarge) {
		return sum, Input{}, tooLarge()
	} else if err != nil {
		return sum, Input{}, fmt.Errorf("reading %s %s: %w", what, c.name, err)
	}
	if cr.n == 0 {
		return sum, Input{}, fmt.Errorf("%s %s is empty", what, c.name)
	}
	h.Sum(sum[:0])
	return sum, Input{Name: c.name, SHA256: hex.EncodeToString(sum[:]), Size: cr.n}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Hex is an integer that JSON and YAML carry as a "0x..." string, the way
// policies and features are written in AMD's documents and in Kata's
// configuration.
type Hex uint64

// MarshalText encodes the value as 0x-prefixed lowercase hex.
func (h Hex) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%#x", uint64(h))), nil }

// ParseHex parses "0x..." (or bare hex digits) into a 64-bit value.
func ParseHex(s string) (uint64, error) {
	v, ok := parseHex(strings.TrimSpace(s))
	if !ok {
		return 0, fmt.Errorf("%q is not a hexadecimal number (expected e.g. 0x1)", s)
	}
	return v, nil
}

// VCPURange is an inclusive range of vCPU counts.
type VCPURange struct{ Min, Max int }

// ParseVCPURange parses "N" (exactly N) or "A-B".
func ParseVCPURange(s string) (VCPURange, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := strconv.Atoi(lo)
	if err != nil {
		return VCPURange{}, fmt.Errorf("vCPU count %q: expected N or A-B with 1 <= A <= B <= %d", s, MaxVCPUs)
	}
	b := a
	if isRange {
		if b, err = strconv.Atoi(hi); err != nil {
			return VCPURange{}, fmt.Errorf("vCPU count %q: expected N or A-B with 1 <= A <= B <= %d", s, MaxVCPUs)
		}
	}
	r := VCPURange{Min: a, Max: b}
	return r, r.validate()
}

func (r VCPURange) validate() error {
	if r.Min < 1 || r.Max > MaxVCPUs || r.Min > r.Max {
		return fmt.Errorf("vCPU count %d-%d out of range: expected 1 <= A <= B <= %d", r.Min, r.Max, MaxVCPUs)
	}
	return nil
}

// Defaults of the SNP options.
const (
	// DefaultGuestFeatures is SEV_FEATURES with only SNPActive set, what
	// QEMU uses unless told otherwise.
	DefaultGuestFeatures = 0x1
	// DefaultGuestPolicy is the SNP guest policy Kata and QEMU use by
	// default: SMT allowed (bit 16) and the must-be-one bit 17; no debug,
	// no migration agent, ABI 0.0.
	DefaultGuestPolicy = 0x30000
)

// SNPRequest describes an SEV-SNP guest to compute reference values for.
type SNPRequest struct {
	Firmware Component
	// Kernel, Initrd and Cmdline are the measured direct-boot components;
	// without a kernel, neither of the others may be given.
	Kernel, Initrd Component
	Cmdline        *string
	VCPUs          VCPURange
	// ProductLine pins one product line; empty means one set of values per
	// product line.
	ProductLine ProductLine
	// VCPUType overrides the CPU model of the product line.
	VCPUType      *VCPUType
	GuestFeatures uint64
	GuestPolicy   uint64
	// NodeTCB, when set, fills the minimum TCB of the node's product line
	// (see minimumTCB); NodeTCBUnknown says why it is not known otherwise.
	NodeTCB        *NodeTCB
	NodeTCBUnknown string
}

// Document is the output of berth refvalues, schema SchemaVersion. See
// SCHEMA.md for the meaning of every field.
type Document struct {
	SchemaVersion string     `json:"schemaVersion"`
	Platform      string     `json:"platform,omitempty"`
	TEE           string     `json:"tee"`
	Inputs        Inputs     `json:"inputs"`
	SNP           *SNPValues `json:"snp,omitempty"`
	TDX           *TDXValues `json:"tdx,omitempty"`
	// InitData is the init-data binding (--initdata), when asked for.
	InitData *InitDataValues `json:"initData,omitempty"`
}

// Inputs lists the components the values were computed from.
type Inputs struct {
	Firmware Input   `json:"firmware"`
	Kernel   *Input  `json:"kernel,omitempty"`
	Initrd   *Input  `json:"initrd,omitempty"`
	Cmdline  *string `json:"cmdline,omitempty"`
	// CmdlineSource says where Cmdline came from: the --cmdline flag, or
	// the Kata runtime's command line derived from its configuration.
	CmdlineSource string `json:"cmdlineSource,omitempty"`
}

// SNPValues are the SEV-SNP reference values.
type SNPValues struct {
	VMM            string    `json:"vmm"`
	GuestPolicy    Hex       `json:"guestPolicy"`
	GuestFeatures  Hex       `json:"guestFeatures"`
	FirmwareDigest Digest384 `json:"firmwareDigest"`
	Sets           []SNPSet  `json:"sets"`
}

// SNPSet holds the launch digests for one vCPU type (product line).
type SNPSet struct {
	ProductLine   ProductLine    `json:"productLine,omitempty"`
	VCPUType      string         `json:"vcpuType"`
	VCPUSignature Hex            `json:"vcpuSignature"`
	LaunchDigests []LaunchDigest `json:"launchDigests"`
	MinimumTCB    *MinimumTCB    `json:"minimumTCB,omitempty"`
}

// LaunchDigest is the expected MEASUREMENT for a guest with VCPUs vCPUs.
type LaunchDigest struct {
	VCPUs  int       `json:"vcpus"`
	Digest Digest384 `json:"digest"`
}

// MinimumTCB describes the TCB_VERSION fields of a product line. The boot
// components do not decide them: they come from the node's firmware
// (Status TCBFromNode, Source) or from the operator (TCBUnconfirmed,
// Reason saying why the node could not tell).
type MinimumTCB struct {
	Status string     `json:"status"`
	Source string     `json:"source,omitempty"`
	Reason string     `json:"reason,omitempty"`
	Fields []TCBValue `json:"fields"`
}

// TCBValue is one TCB component; Value is nil until known.
type TCBValue struct {
	TCBField
	Value  *uint8 `json:"value"`
	Source string `json:"source,omitempty"`
}

// TCBUnconfirmed is MinimumTCB.Status when the values are not known.
const TCBUnconfirmed = "operator must confirm"

// TDXRequest describes a TDX guest to compute MRTD for.
type TDXRequest struct {
	Firmware  Component
	PageOrder PageOrder
	// RTMR, when set, asks for RTMR0-2 of a direct boot too.
	RTMR *TDXRTMRRequest
}

// TDXValues are the TDX reference values.
type TDXValues struct {
	PageOrder PageOrder   `json:"pageOrder"`
	MRTD      Digest384   `json:"mrtd"`
	RTMR      *RTMRValues `json:"rtmr,omitempty"`
}

// SNP computes SEV-SNP reference values.
func SNP(req SNPRequest) (*Document, error) {
	if !req.Firmware.Given() {
		return nil, fmt.Errorf("no firmware given: SNP launch digests need the AmdSev OVMF image")
	}
	if !req.Kernel.Given() && (req.Initrd.Given() || req.Cmdline != nil) {
		return nil, fmt.Errorf("an initrd or kernel command line without a kernel is not measured: give the kernel too")
	}
	if err := req.VCPUs.validate(); err != nil {
		return nil, err
	}
	if req.GuestFeatures&1 == 0 {
		return nil, fmt.Errorf("guest features %#x lack bit 0 (SNPActive): an SNP guest always has it", req.GuestFeatures)
	}
	if req.GuestPolicy&(1<<17) == 0 {
		return nil, fmt.Errorf("guest policy %#x lacks bit 17, which the SEV-SNP firmware ABI requires to be one", req.GuestPolicy)
	}
	fw, fwIn, err := req.Firmware.readAll("firmware", maxFirmwareSize)
	if err != nil {
		return nil, err
	}
	o, err := ParseOVMF(fw)
	if err != nil {
		return nil, fmt.Errorf("firmware %s: %w", req.Firmware.Name(), err)
	}
	doc := &Document{SchemaVersion: SchemaVersion, TEE: "snp", Inputs: Inputs{Firmware: fwIn}}
	var hashes *SEVHashes
	if req.Kernel.Given() {
		h := SEVHashes{Initrd: sha256.Sum256(nil)}
		var in Input
		var head []byte
		if h.Kernel, in, head, err = req.Kernel.hash("kernel", maxKernelSize, make([]byte, kernelHead)); err != nil {
			return nil, err
		}
		if err := checkSetup(head, in.Size); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", req.Kernel.Name(), err)
		}
		doc.Inputs.Kernel = &in
		if req.Initrd.Given() {
			var in Input
			if h.Initrd, in, _, err = req.Initrd.hash("initrd", maxInitrdSize, nil); err != nil {
				return nil, err
			}
			doc.Inputs.Initrd = &in
		}
		cmdline := ""
		if req.Cmdline != nil {
			cmdline = *req.Cmdline
		}
		h.Cmdline = sha256.Sum256(append([]byte(cmdline), 0))
		doc.Inputs.Cmdline = &cmdline
		hashes = &h
	}
	prefix, err := MeasureSNP(o, hashes)
	if err != nil {
		return nil, fmt.Errorf("firmware %s: %w", req.Firmware.Name(), err)
	}
	type target struct {
		line ProductLine
		vcpu VCPUType
	}
	var targets []target
	switch {
	case req.VCPUType != nil:
		targets = []target{{req.ProductLine, *req.VCPUType}}
	case req.ProductLine != "":
		targets = []target{{req.ProductLine, req.ProductLine.VCPUType()}}
	default:
		for _, p := range ProductLines() {
			targets = append(targets, target{p, p.VCPUType()})
		}
	}
	v := &SNPValues{VMM: "qemu", GuestPolicy: Hex(req.GuestPolicy), GuestFeatures: Hex(req.GuestFeatures), FirmwareDigest: prefix.Firmware}
	for _, t := range targets {
		ds, err := prefix.LaunchDigests(t.vcpu, req.GuestFeatures, VMMQEMU, req.VCPUs.Max)
		if err != nil {
			return nil, err
		}
		set := SNPSet{ProductLine: t.line, VCPUType: t.vcpu.Name, VCPUSignature: Hex(t.vcpu.Signature)}
		for n := req.VCPUs.Min; n <= req.VCPUs.Max; n++ {
			set.LaunchDigests = append(set.LaunchDigests, LaunchDigest{VCPUs: n, Digest: ds[n-1]})
		}
		if t.line != "" {
			set.MinimumTCB = minimumTCB(t.line, req.NodeTCB, req.NodeTCBUnknown)
		}
		v.Sets = append(v.Sets, set)
	}
	doc.SNP = v
	return doc, nil
}

// TDX computes TDX reference values (MRTD).
func TDX(req TDXRequest) (*Document, error) {
	if !req.Firmware.Given() {
		return nil, fmt.Errorf("no firmware given: MRTD needs the TDVF (IntelTdx OVMF) image")
	}
	fw, fwIn, err := req.Firmware.readAll("firmware", maxFirmwareSize)
	if err != nil {
		return nil, err
	}
	t, err := ParseTDVF(fw)
	if err != nil {
		return nil, fmt.Errorf("firmware %s: %w", req.Firmware.Name(), err)
	}
	doc := &Document{
		SchemaVersion: SchemaVersion, TEE: "tdx", Inputs: Inputs{Firmware: fwIn},
		TDX: &TDXValues{PageOrder: req.PageOrder, MRTD: MRTD(t, req.PageOrder)},
	}
	if req.RTMR != nil {
		if doc.TDX.RTMR, err = tdxRTMRs(t, req.RTMR, &doc.Inputs); err != nil {
			return nil, fmt.Errorf("firmware %s: %w", req.Firmware.Name(), err)
		}
	}
	return doc, nil
}

// WriteTable writes the document for people: inputs, then one row per
// value.
func (d *Document) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	if d.Platform != "" {
		fmt.Fprintf(&b, "Platform:  %s\n", d.Platform)
	}
	fmt.Fprintf(&b, "TEE:       %s\n", d.TEE)
	in := func(label string, i *Input) {
		if i != nil {
			fmt.Fprintf(&b, "%-10s %s (%d bytes, sha256 %s)\n", label, i.Name, i.Size, i.SHA256)
		}
	}
	in("Firmware:", &d.Inputs.Firmware)
	in("Kernel:", d.Inputs.Kernel)
	in("Initrd:", d.Inputs.Initrd)
	if d.Inputs.Cmdline != nil {
		fmt.Fprintf(&b, "Cmdline:   %q\n", *d.Inputs.Cmdline)
		if d.Inputs.CmdlineSource != "" {
			fmt.Fprintf(&b, "           (%s)\n", d.Inputs.CmdlineSource)
		}
	}
	if s := d.SNP; s != nil {
		fmt.Fprintf(&b, "Policy:    %#x\nFeatures:  %#x\nVMM:       %s\n\n", uint64(s.GuestPolicy), uint64(s.GuestFeatures), s.VMM)
		fmt.Fprintf(&b, "%-13s %-12s %-10s %-5s %s\n", "PRODUCT LINE", "VCPU TYPE", "SIGNATURE", "VCPUS", "LAUNCH DIGEST (SHA-384)")
		for _, set := range s.Sets {
			line := string(set.ProductLine)
			if line == "" {
				line = "-"
			}
			for _, ld := range set.LaunchDigests {
				fmt.Fprintf(&b, "%-13s %-12s %-10s %-5d %s\n", line, set.VCPUType, fmt.Sprintf("%#x", uint64(set.VCPUSignature)), ld.VCPUs, ld.Digest)
			}
		}
		for _, set := range s.Sets {
			if set.MinimumTCB == nil {
				continue
			}
			var names []string
			for _, f := range set.MinimumTCB.Fields {
				if f.Value != nil {
					names = append(names, fmt.Sprintf("%s (byte %d) = %d", f.Name, f.Byte, *f.Value))
				} else {
					names = append(names, fmt.Sprintf("%s (byte %d)", f.Name, f.Byte))
				}
			}
			fmt.Fprintf(&b, "\nMinimum TCB %s: %s; fields %s", set.ProductLine, set.MinimumTCB.Status, strings.Join(names, ", "))
			if why := set.MinimumTCB.Source + set.MinimumTCB.Reason; why != "" {
				fmt.Fprintf(&b, "\n  (%s)", why)
			}
		}
		b.WriteString("\n")
	}
	if t := d.TDX; t != nil {
		fmt.Fprintf(&b, "\nPAGE ORDER   MRTD (SHA-384)\n%-12s %s\n", t.PageOrder, t.MRTD)
		if r := t.RTMR; r != nil {
			fmt.Fprintf(&b, "\nMemory:    %d MiB\nQEMU:      %s\nBoot:      %s\n", r.MemoryMiB, r.QEMU, bootSourceText(r.Source))
			if r.EDK2 != "" {
				fmt.Fprintf(&b, "edk2:      %s\n", r.EDK2)
			}
			b.WriteString("\nREGISTER  VALUE (SHA-384)\n")
			for i, v := range r.RTMR {
				fmt.Fprintf(&b, "RTMR%d     %s\n", i, v)
			}
		}
	}
	d.InitData.writeTable(&b)
	_, err := w.Write(b.Bytes())
	return err
}
