package catalog

import (
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func TestReachability(t *testing.T) {
	checked := func(ts ...facts.Endpoint) facts.Reachability {
		return facts.Reachability{Checked: true, TimeoutMS: 5000, Targets: ts}
	}
	reg := func(e facts.Endpoint) facts.Endpoint {
		e.Role = "registry"
		e.URL = "https://registry.k8s.io/v2/"
		return e
	}
	kbs := func(e facts.Endpoint) facts.Endpoint {
		e.Role = "attestation"
		e.URL = "https://kbs.example:8080"
		return e
	}
	tests := []struct {
		name       string
		r          facts.Reachability
		id, on     string
		status     check.Status
		msg        string
		notApplied bool
	}{
		{"registry: --network not given", facts.Reachability{NotChecked: "not checked (--network not given)"}, "network.registry.reachable", "kubeadm-qemu-none", check.Skip, "--network not given", false},
		{"registry: offline root", facts.Reachability{NotChecked: "not checked (offline root: ...)"}, "network.registry.reachable", "kubeadm-qemu-none", check.Skip, "offline root", false},
		{"registry answers 401", checked(reg(facts.Endpoint{Reachable: true, HTTPStatus: 401})), "network.registry.reachable", "kubeadm-qemu-none", check.Pass, "reachable: https://registry.k8s.io/v2/", false},
		{"registry times out: a warning", checked(reg(facts.Endpoint{Failure: "timeout"})), "network.registry.reachable", "kubeadm-qemu-none", check.Warn, "no answer within 5000 ms", false},
		{"registry answers 503", checked(reg(facts.Endpoint{Reachable: true, HTTPStatus: 503})), "network.registry.reachable", "kubeadm-qemu-none", check.Warn, "HTTP 503", false},
		{"no registry probed", checked(kbs(facts.Endpoint{Reachable: true, HTTPStatus: 404})), "network.registry.reachable", "kubeadm-qemu-none", check.Skip, "no registry given", false},
		{"KBS refused: blocking on SNP", checked(kbs(facts.Endpoint{Failure: "refused"})), "network.attestation.reachable", "kubeadm-qemu-snp", check.Fail, "connection refused", false},
		{"KBS with its own CA", checked(kbs(facts.Endpoint{Reachable: true, CertUntrusted: true})), "network.attestation.reachable", "kubeadm-qemu-tdx", check.Pass, "reachable", false},
		{"no --attestation-url", checked(reg(facts.Endpoint{Reachable: true, HTTPStatus: 200})), "network.attestation.reachable", "kubeadm-qemu-snp", check.Skip, "--attestation-url", false},
		{"attestation is not for plain platforms", checked(kbs(facts.Endpoint{Failure: "refused"})), "network.attestation.reachable", "kubeadm-qemu-none", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			f.Network.Reachability = tt.r
			fd, ok := finding(t, f, tt.on, tt.id)
			if ok == tt.notApplied {
				t.Fatalf("%s applies to %s: %v", tt.id, tt.on, ok)
			}
			if ok {
				wantFinding(t, fd, tt.status, tt.msg)
			}
		})
	}
}
