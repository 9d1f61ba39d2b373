package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// SandboxOutcome is how a sandbox proof ended.
type SandboxOutcome string

// The outcomes of ProveSandbox. Skip is never a pass: it says the proof
// could not be made on this node, and why.
const (
	SandboxPass SandboxOutcome = "pass"
	SandboxFail SandboxOutcome = "fail"
	SandboxSkip SandboxOutcome = "skip"
)

// SandboxResult is what starting a pod sandbox with a handler showed.
type SandboxResult struct {
	Handler string         `json:"handler"`
	Outcome SandboxOutcome `json:"outcome"`
	// Reason is why the proof was skipped (Skip).
	Reason string `json:"reason,omitempty"`
	// Error is the runtime's error text (Fail): for Kata it carries the
	// shim's and the hypervisor's stderr, which is what an operator needs.
	Error string `json:"error,omitempty"`
	// Cleanup is set when the sandbox could not be stopped or removed:
	// something of berth's may be left on the node.
	Cleanup string `json:"cleanup,omitempty"`
	// Duration is how long the proof took, in seconds.
	Duration float64 `json:"seconds"`
}

// LabelKey marks the pod sandboxes berth starts to prove a handler, so that
// an operator (and the tests) can tell them from the kubelet's.
const LabelKey = "berth.dev/verify"

// SandboxNamespace is the namespace of the proving sandbox's metadata. It
// exists only in the runtime: the kubelet never sees the sandbox.
const SandboxNamespace = "berth-verify"

// SkipReason returns why a sandbox of platform p cannot be proven on the
// host f describes ("" when it can). A Kata handler whose VM runs on the
// node needs the hypervisor device (/dev/kvm, /dev/mshv on AKS): without
// it Kata fails at every pod start, which berth check reports already, and
// a sandbox failure would only repeat that less clearly. runtimeType is the
// handler's runtime type as the runtime reported it: a handler that does
// not run a Kata shim (io.containerd.runc.v2, say) needs no device; ""
// (not reported, as with CRI-O) is taken to be the platform's Kata shim.
// Peer pods run their VM in a cloud and need no device either. f is what
// discovery read: this function reads nothing itself.
func SkipReason(p platform.Platform, runtimeType string, f *facts.Facts) string {
	if runtimeType != "" && !strings.Contains(runtimeType, "kata") {
		return ""
	}
	dev := p.HypervisorDevice()
	if dev == "" {
		return ""
	}
	if f == nil {
		return "the host's devices are not known: no facts were given"
	}
	n, known := f.Devices.Nodes[dev]
	if known && !n.Exists {
		return fmt.Sprintf("/%s does not exist on this node: %s cannot start a VM (see berth check)", dev, p.Hypervisor())
	}
	if dev != "dev/kvm" {
		return ""
	}
	k := f.Devices.KVM
	switch {
	case k == nil && !known:
		return "whether /dev/kvm is usable is not known (no KVM probe in the facts)"
	case k == nil:
		// The device exists but was not probed (an offline root): the
		// sandbox itself is the probe.
		return ""
	case !k.Opened:
		return fmt.Sprintf("/dev/kvm is not usable: opening it failed (%s)", firstOf(k.Error, k.Errno, "no error recorded"))
	case !k.CreateVM:
		return fmt.Sprintf("/dev/kvm is not usable: KVM_CREATE_VM failed (%s)", firstOf(k.Error, k.Errno, "no error recorded"))
	}
	return ""
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// cleanupTimeout bounds stopping and removing the sandbox, on a context of
// its own: the caller's may be cancelled or past its deadline.
const cleanupTimeout = 30 * time.Second

// ProveSandbox starts a pod sandbox with handler over the CRI socket (a
// path) and stops and removes it again: a handler being listed proves
// only that the runtime read its configuration, while a sandbox proves
// that the shim, the hypervisor and the guest start. Kata boots a VM here,
// which takes seconds; timeout bounds the start. The sandbox is stopped
// and removed whatever happens (error, timeout, cancelled ctx), on a
// fresh context. A cancelled ctx does not abort a start under way:
// containerd interrupted while it sets up the pod network leaves the
// network namespace and the CNI result behind, so the start is let finish
// (within timeout), the sandbox removed and the proof reported as
// cancelled. logDir is the sandbox's log directory (the caller's
// temporary directory). The returned error is for failures to ask at all
// (the socket); a sandbox that does not start is a SandboxFail result.
func ProveSandbox(ctx context.Context, socket, handler, logDir string, timeout time.Duration) (SandboxResult, error) {
	return Endpoint{Path: socket}.ProveSandbox(ctx, handler, logDir, timeout)
}

// ProveSandbox proves handler with a sandbox on the runtime at e.
func (e Endpoint) ProveSandbox(ctx context.Context, handler, logDir string, timeout time.Duration) (res SandboxResult, _ error) {
	socket := e.String()
	res.Handler = handler
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("proving handler %s: %w", handler, err)
	}
	start := time.Now()
	defer func() { res.Duration = time.Since(start).Round(time.Millisecond).Seconds() }()
	conn, err := e.client()
	if err != nil {
		return res, fmt.Errorf("CRI socket %s: %w", socket, err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      "berth-verify-" + suffix,
			Uid:       "berth-verify-" + suffix,
			Namespace: SandboxNamespace,
		},
		Hostname:     "berth-verify",
		LogDirectory: logDir,
		Labels:       map[string]string{LabelKey: handler},
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	resp, err := rs.RunPodSandbox(runCtx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	cancel()
	// The runtime may have created the sandbox even when the call failed
	// or timed out: find it by its unique name to clean it up.
	sid := resp.GetPodSandboxId()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer ccancel()
	if sid == "" {
		sid = findSandbox(cctx, rs, handler, cfg.Metadata.Uid)
	}
	if sid != "" {
		if cerr := removeSandbox(cctx, rs, sid); cerr != nil {
			res.Cleanup = cerr.Error()
		}
	}
	if err != nil {
		if status.Code(err) == codes.Unavailable { // nothing listens
			return res, fmt.Errorf("CRI RunPodSandbox over %s: %w", socket, err)
		}
		res.Outcome, res.Error = SandboxFail, runtimeText(err, timeout)
		return res, nil
	}
	if ctx.Err() != nil {
		res.Outcome, res.Error = SandboxFail, "cancelled: the sandbox started and was removed again, but the proof was interrupted"
		if res.Cleanup != "" {
			res.Error = "cancelled, and the sandbox could not be removed: " + res.Cleanup
		}
		return res, nil
	}
	if res.Cleanup != "" {
		res.Outcome, res.Error = SandboxFail, "the sandbox started but could not be removed: "+res.Cleanup
		return res, nil
	}
	res.Outcome = SandboxPass
	return res, nil
}

// runtimeText is the runtime's own message: the gRPC status message, in
// which containerd passes on what the shim printed.
func runtimeText(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Sprintf("the sandbox did not start within %s: %s", timeout, status.Convert(err).Message())
	}
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// findSandbox returns the id of the sandbox with uid among those
// labelled for handler, "" if none.
func findSandbox(ctx context.Context, rs runtimeapi.RuntimeServiceClient, handler, uid string) string {
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{LabelKey: handler}}})
	if err != nil {
		return ""
	}
	for _, sb := range list.GetItems() {
		if sb.GetMetadata().GetUid() == uid {
			return sb.GetId()
		}
	}
	return ""
}

// removeSandbox stops and removes the sandbox id.
func removeSandbox(ctx context.Context, rs runtimeapi.RuntimeServiceClient, id string) error {
	var errs []error
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", id, err))
	}
	if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		errs = append(errs, fmt.Errorf("removing sandbox %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// TempLogDir makes a log directory for ProveSandbox; remove it after.
func TempLogDir() (string, error) {
	d, err := os.MkdirTemp("", "berth-verify-")
	if err != nil {
		return "", fmt.Errorf("sandbox log directory: %w", err)
	}
	return d, nil
}
