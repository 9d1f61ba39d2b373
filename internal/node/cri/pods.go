package cri

import (
	"context"
	"fmt"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"berth.dev/berth/internal/node/podguard"
)

// RunningPods lists the pod sandboxes of the runtime at e that are ready
// (running) and use one of handlers, for the removal guards (podguard).
// berth's own proving sandboxes (LabelKey) are left out: they are removed
// within their timeout, and a removal must not wait on them. A sandbox
// that is not ready runs nothing: its pod is stopped, and the kubelet
// starts a new sandbox to run it again.
func (e Endpoint) RunningPods(ctx context.Context, handlers []string, timeout time.Duration) ([]podguard.Pod, error) {
	socket := e.String()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, done, err := e.runtimeService()
	if err != nil {
		return nil, err
	}
	defer done()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox over %s: %w", socket, err)
	}
	pods := []podguard.Pod{}
	for _, sb := range list.GetItems() {
		if _, ours := sb.GetLabels()[LabelKey]; ours || !slices.Contains(handlers, sb.GetRuntimeHandler()) {
			continue
		}
		pods = append(pods, podguard.Pod{Namespace: sb.GetMetadata().GetNamespace(), Name: sb.GetMetadata().GetName(),
			Handler: sb.GetRuntimeHandler(), ID: sb.GetId()})
	}
	return pods, nil
}

// runtimeService is a CRI runtime client of e; done closes it.
func (e Endpoint) runtimeService() (rs runtimeapi.RuntimeServiceClient, done func(), _ error) {
	conn, err := e.client()
	if err != nil {
		return nil, nil, fmt.Errorf("CRI socket %s: %w", e.String(), err)
	}
	return runtimeapi.NewRuntimeServiceClient(conn), func() { conn.Close() }, nil
}
