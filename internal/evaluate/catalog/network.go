package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// reachable evaluates the probed targets of one role. The probes are
// opt-in: when they did not run (no --network, or an offline root) the
// check is skipped with the reason rather than unknown, so that asking
// nothing does not make every platform "ready with warnings"; it never
// passes without a probe.
func reachable(f *facts.Facts, role, none, remedy string) check.Result {
	r := f.Network.Reachability
	if !r.Checked {
		return check.Result{Status: check.Skip, Message: orDefault(r.NotChecked, "not checked"),
			Evidence: []check.Evidence{check.Ev("network.reachability.checked", false)}}
	}
	var ok, bad, sick []string
	var ev []check.Evidence
	for _, t := range r.Targets {
		if t.Role != role {
			continue
		}
		ev = append(ev, check.Ev("network.reachability.targets["+t.URL+"]", endpointSummary(t)))
		switch {
		case !t.Reachable:
			bad = append(bad, t.URL+": "+failureText(t, r.TimeoutMS))
		case t.HTTPStatus >= 500:
			sick = append(sick, fmt.Sprintf("%s answered HTTP %d", t.URL, t.HTTPStatus))
		default:
			ok = append(ok, t.URL)
		}
	}
	switch {
	case len(ev) == 0:
		return check.Result{Status: check.Skip, Message: none}
	case len(bad) > 0:
		return check.Failed("unreachable: "+strings.Join(bad, "; "), remedy, ev...)
	case len(sick) > 0:
		return check.Warned(strings.Join(sick, "; "), "the service is reachable but failing: check it, or its load balancer", ev...)
	}
	return check.Ok("reachable: "+strings.Join(ok, ", "), ev...)
}

func endpointSummary(t facts.Endpoint) string {
	switch {
	case t.CertUntrusted:
		return "reachable (certificate not trusted by this host)"
	case t.Reachable:
		return fmt.Sprintf("reachable (HTTP %d)", t.HTTPStatus)
	}
	return "unreachable (" + t.Failure + ")"
}

func failureText(t facts.Endpoint, timeoutMS int64) string {
	switch t.Failure {
	case "timeout":
		return fmt.Sprintf("no answer within %d ms", timeoutMS)
	case "refused":
		return "connection refused"
	case "dns":
		return "name does not resolve"
	case "tls":
		return "TLS handshake failed"
	}
	return orDefault(t.Error, "request failed")
}

func networkChecks() []check.Check {
	return []check.Check{{
		ID:    "network.registry.reachable",
		Title: "if the container registry answers (--network)",
		Why: "Every pod's images, including the sandbox (pause) image, are pulled from a registry: by containerd on the host, or by " +
			"the guest itself on guest-pull platforms, through the host's network either way. A mirror or pull-through cache may " +
			"stand in, so an unreachable registry is a warning.",
		Reads:     []string{"network.reachability"},
		Platforms: "all (warning); skipped without --network or on an offline root",
		Remedies:  []string{"allow HTTPS to the registry (firewall, HTTPS_PROXY/NO_PROXY for containerd), or configure a registry mirror and pass it with --registry"},
		Applies:   check.Always(check.Warning),
		Run: func(f *facts.Facts) check.Result {
			return reachable(f, "registry", "no registry given (--registry)",
				"allow HTTPS to the registry (firewall, proxy settings of containerd) or use a reachable mirror")
		},
	}, {
		ID:    "network.attestation.reachable",
		Title: "if the attestation service answers (--network)",
		Why: "A confidential guest gets its secrets (image decryption keys, sealed secrets, Contrast's mesh certificates) from the " +
			"attestation service (Trustee KBS or Contrast coordinator) only after attesting to it; a guest that cannot reach it " +
			"starts without them and its workload fails.",
		Reads:     []string{"network.reachability"},
		Platforms: "confidential platforms; skipped without --network, without --attestation-url or on an offline root",
		Remedies:  []string{"allow the node (and the guests' traffic through it) to reach the KBS or coordinator URL, or fix the URL given with --attestation-url"},
		Applies:   check.When(check.Blocking, isConfidential),
		Run: func(f *facts.Facts) check.Result {
			return reachable(f, "attestation", "no attestation service given (--attestation-url)",
				"allow the node to reach the attestation service (firewall, proxy, DNS) or fix --attestation-url")
		},
	}}
}
