package installcmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

const (
	rvData    = "../../../internal/node/refvalues/testdata/"
	mfVectors = "../../../internal/node/manifest/testdata/vectors.yaml"
)

// vectorsRelease is the CLI test release (shim, QEMU, configs) with its
// boot components replaced by those of the reference-value vectors'
// manifest: the real OVMF and the measured command line.
func vectorsRelease(t *testing.T) (manifestPath, mirror string) {
	t.Helper()
	rel := makeCLIRelease(t, "http://127.0.0.1:9/unplugged")
	vec, err := os.ReadFile(mfVectors)
	if err != nil {
		t.Fatal(err)
	}
	_, vecComps, ok := strings.Cut(string(vec), "components:\n")
	if !ok {
		t.Fatal("vectors manifest has no components")
	}
	head, comps, _ := strings.Cut(rel.manifest, "components:\n")
	var keep []string
	for _, c := range strings.SplitAfter(comps, "\n  - name: ") {
		if !strings.HasPrefix(c, "ovmf-amdsev\n") && !strings.HasPrefix(c, "kernel-confidential\n") {
			keep = append(keep, c)
		}
	}
	body := strings.TrimSuffix(strings.Join(keep, ""), "  - name: ")
	rel.manifest = head + "components:\n" + body + vecComps
	return rel.write(t)
}

// TestRefvaluesInstalled installs the reference-value vectors' manifest
// (the real Debian AmdSev OVMF, the synthetic kernel and initrd) with the
// real berth install into a copy of the Genoa fixture, then computes the
// values from what was installed: they must be vector D2's, with the TCB
// the node's; a changed installed file must be an error naming it.
func TestRefvaluesInstalled(t *testing.T) {
	root := copyInstallRoot(t)
	mp, mirror := vectorsRelease(t)
	code, out, errOut := runCheckCLI(t, "--root", root, "install", "-p", "k3s-qemu-snp-genoa", "-m", mp, "--from", mirror, "--from", rvData, "--no-config")
	if code != 0 {
		t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
	}
	args := []string{"--root", root, "refvalues", "--platform", "k3s-qemu-snp-genoa", "--installed", "--node", "--vcpus", "1", "--cmdline", "console=ttyS0"}

	code, out, errOut = runCheckCLI(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("refvalues --installed: exit %d\n%s\n%s", code, out, errOut)
	}
	var doc struct {
		Inputs struct {
			Firmware struct{ Name, SHA256 string }
			Cmdline  *string
		}
		SNP struct {
			Sets []struct {
				LaunchDigests []struct{ Digest string }
				MinimumTCB    struct {
					Status, Source string
					Fields         []struct{ Value *int }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(doc.Inputs.Firmware.Name, filepath.Join("opt", "berth", "versions")) || doc.Inputs.Cmdline == nil || *doc.Inputs.Cmdline != "console=ttyS0" {
		t.Errorf("inputs not the installed files: %+v", doc.Inputs)
	}
	if len(doc.SNP.Sets) != 1 || doc.SNP.Sets[0].LaunchDigests[0].Digest != "8acb9ace3be9e302e4fa1d0d5fbc229cd0c916d2e0f3f51eb4628331d01826502ab029b3975d71651a2b0e3e1d1f61b5" {
		t.Fatalf("launch digest is not vector D2's:\n%s", out)
	}
	tcb := doc.SNP.Sets[0].MinimumTCB
	if tcb.Status != "from node" || !strings.Contains(tcb.Source, "recorded /dev/sev probe") || *tcb.Fields[3].Value != 72 {
		t.Errorf("minimum TCB not the node's: %+v", tcb)
	}

	// Without --cmdline, the command line is the one Kata passes, and the
	// output says so.
	code, out, errOut = runCheckCLI(t, append(slices.Clone(args[:len(args)-2]), "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"cmdline": "tsc=reliable no_timer_check`) ||
		!strings.Contains(out, `"cmdlineSource": "Kata 4.1.0 runtime's command line for berth's configuration-qemu-snp.toml (berth config has not configured k3s-qemu-snp-genoa on this host), derived by berth"`) {
		t.Errorf("--installed without --cmdline: exit %d\n%s\n%s", code, out, errOut)
	}

	// With the platform configured (berth config's state names the Kata
	// file), the command line is derived from the file on the host and
	// its config.d drop-ins: the oracle vector of that file.
	p, err := platform.Parse("k3s-qemu-snp-genoa")
	if err != nil {
		t.Fatal(err)
	}
	kataDir := filepath.Join(root, "opt/berth/etc/kata")
	if err := os.MkdirAll(filepath.Join(kataDir, "config.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	dropin := rvData + "kata-cmdline/configs/dropin/"
	for from, to := range map[string]string{"configuration-qemu-snp.toml": p.Name() + ".toml", "config.d/10-kernel.toml": "config.d/10-kernel.toml", "config.d/20-agent.toml": "config.d/20-agent.toml"} {
		b, err := os.ReadFile(dropin + from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kataDir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := `{"version": 1, "platforms": {"kata-qemu-snp": {"platform": "k3s-qemu-snp-genoa", "files": [{"path": "/opt/berth/etc/kata/` + p.Name() + `.toml", "kind": "owned"}]}}}`
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(configure.StatePath)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, configure.StatePath), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCheckCLI(t, append(slices.Clone(args[:len(args)-2]), "-o", "json")...)
	if code != 0 || !strings.Contains(out, "agent.cdh_api_timeout=90 agent.launch_process_timeout=6 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 agent.guest_components_rest_api=all\"") ||
		!strings.Contains(out, "/opt/berth/etc/kata/"+p.Name()+".toml on the host with 2 drop-ins of its config.d, derived by berth") {
		t.Errorf("--installed with berth config's Kata file: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = runCheckCLI(t, append(args, "-o", "contrast")...)
	if code != 0 || !strings.Contains(out, `"MicrocodeVersion": 72`) || !strings.Contains(out, `"ProductName": "Genoa"`) {
		t.Errorf("-o contrast: exit %d\n%s\n%s", code, out, errOut)
	}

	// Flags that name components exclude --installed.
	code, _, errOut = runCheckCLI(t, append(args, "--firmware", rvData+"OVMF.amdsev.fd")...)
	if code != 2 || !strings.Contains(errOut, "--firmware and --installed exclude each other") {
		t.Errorf("--firmware with --installed: exit %d, %s", code, errOut)
	}
	// A platform the installation does not serve.
	code, _, errOut = runCheckCLI(t, "--root", root, "refvalues", "--platform", "k3s-qemu-snp-milan", "--installed")
	if code != 2 || !strings.Contains(errOut, "not k3s-qemu-snp-milan") {
		t.Errorf("other platform: exit %d, %s", code, errOut)
	}

	// The installed kernel changes: an error naming the file and the
	// record, never values.
	matches, _ := filepath.Glob(filepath.Join(root, "opt/berth/versions/*/share/kata-containers/kernel-synthetic.bin"))
	if len(matches) != 1 {
		t.Fatalf("installed kernel: %v", matches)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := os.WriteFile(matches[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCheckCLI(t, args...)
	if code == 0 || out != "" || !strings.Contains(errOut, "kernel-synthetic.bin") || !strings.Contains(errOut, "does not match the install record") {
		t.Errorf("changed kernel: exit %d\nstdout %q\nstderr %s", code, out, errOut)
	}

	// Nothing installed under another prefix.
	code, _, errOut = runCheckCLI(t, "--root", root, "refvalues", "--platform", "k3s-qemu-snp-genoa", "--installed", "--prefix", "/opt/none")
	if code == 0 || !strings.Contains(errOut, "nothing is installed") {
		t.Errorf("empty prefix: exit %d, %s", code, errOut)
	}
}
