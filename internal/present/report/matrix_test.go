package report

import (
	"bytes"
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/platform"
)

// TestMatrixVariants: a variant (debug, another snapshotter) follows its
// base row and is listed under it only when its verdict differs; a
// variant whose base is not shown has a row of its own.
func TestMatrixVariants(t *testing.T) {
	parse := func(name string) platform.Platform {
		t.Helper()
		p, err := platform.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := parse("kubeadm-qemu-snp")
	debug := parse("kubeadm-qemu-snp+debug")
	plain := parse("kubeadm-qemu-none")
	devmapper := parse("kubeadm-qemu-none+devmapper")
	plainDebug := parse("kubeadm-qemu-none+debug")
	orphan := parse("kubeadm-clh-none+debug") // its base is not shown
	ready := check.Verdict{Status: check.Ready}
	blocked := check.Verdict{Status: check.NotReady, BlockedBy: "kvm.device"}
	ps := []platform.Platform{base, debug, devmapper, plain, plainDebug, orphan}
	vs := []check.Verdict{ready, blocked, ready, ready, ready, ready}
	for i := range vs {
		vs[i].Platform = ps[i].String()
	}
	var buf bytes.Buffer
	if err := WriteMatrix(&buf, &Report{Verdicts: vs}, ps, Style{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	row := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix+" ") {
				return i
			}
		}
		return -1
	}
	b, d := row("  "+base.String()), row("    "+strings.TrimPrefix(debug.String(), base.String()))
	if b < 0 || d != b+1 {
		t.Errorf("the debug variant, not ready where its base is, is not listed under it (rows %d, %d):\n%s", b, d, out)
	}
	// plain's variants (devmapper, debug) share its verdict: no line
	// follows its row.
	if p := row("  " + plain.String()); p < 0 || strings.HasPrefix(lines[p+1], "    ") {
		t.Errorf("%s has no row, or its variants %s and %s, ready as it is, are listed under it:\n%s", plain, devmapper, plainDebug, out)
	}
	if row("  "+orphan.String()) < 0 {
		t.Errorf("%s, whose base is not shown, has no row:\n%s", orphan, out)
	}
	if !strings.Contains(out, "(3 debug and snapshotter variants follow their base platform unless listed)") {
		t.Errorf("the count of variants that follow their base is wrong:\n%s", out)
	}
}
