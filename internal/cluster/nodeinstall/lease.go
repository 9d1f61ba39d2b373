package nodeinstall

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var leasesResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// RestartLease serialises container runtime restarts across the nodes of a
// cluster. A DaemonSet's maxUnavailable paces upgrades, but its first
// rollout starts every pod at once: without a lock, a fresh install would
// restart containerd on every node together, and a configuration that
// breaks the runtime would be tried on all of them before any rollback.
// The installer takes the Lease before its first restart and holds it
// (renewing it) until its run has verified the handlers, so at most one
// node's runtime is down at a time. A holder that dies lets go when the
// Lease expires.
type RestartLease struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace and Name name the Lease (the installer's namespace).
	Namespace, Name string
	// Holder identifies this node's installer (the node name).
	Holder string
	// Duration is how long a holder that stopped renewing keeps the
	// Lease (0: 2 minutes).
	Duration time.Duration
	// Poll is how often a waiting installer retries (0: 2 seconds).
	Poll time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Waiting, when set, is told which holder this installer waits for,
	// once per holder.
	Waiting func(holder string)
}

func (l *RestartLease) defaults() (time.Duration, time.Duration, func() time.Time) {
	d, poll, now := l.Duration, l.Poll, l.Now
	if d <= 0 {
		d = 2 * time.Minute
	}
	if poll <= 0 {
		poll = 2 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return d, poll, now
}

// Acquire waits until this holder holds the Lease, or ctx ends. The
// returned release stops the renewal and hands the Lease back; it is safe
// to call more than once.
func (l *RestartLease) Acquire(ctx context.Context) (release func(), err error) {
	d, poll, now := l.defaults()
	last := ""
	for {
		held, holder, err := l.tryAcquire(ctx, d, now)
		if err != nil {
			if last != "" {
				// Say whom this installer was waiting for: the wait may
				// have run out during the request.
				return nil, fmt.Errorf("waiting for lease %s/%s held by %s: %w", l.Namespace, l.Name, last, err)
			}
			return nil, err
		}
		if held {
			break
		}
		if holder != last && l.Waiting != nil {
			l.Waiting(holder)
		}
		last = holder
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for lease %s/%s held by %s: %w", l.Namespace, l.Name, holder, context.Cause(ctx))
		case <-time.After(poll):
		}
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				// A failed renewal is retried at the next tick; the
				// Lease outlives two missed renewals.
				_, _, _ = l.tryAcquire(rctx, d, now)
			}
		}
	}()
	var released bool
	return func() {
		if released {
			return
		}
		released = true
		stop()
		<-done
		l.handBack(context.WithoutCancel(ctx))
	}, nil
}

// tryAcquire takes or renews the Lease when it is free, expired or
// already this holder's; otherwise it reports the holder. Conflicts (two
// installers racing for a free Lease) are lost by all but one: the API
// server refuses an update of a stale resourceVersion.
func (l *RestartLease) tryAcquire(ctx context.Context, d time.Duration, now func() time.Time) (bool, string, error) {
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	t := metav1.NewMicroTime(now())
	secs := int32(d / time.Second)
	u, err := res.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease := &coordv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &l.Holder, LeaseDurationSeconds: &secs, AcquireTime: &t, RenewTime: &t},
		}
		obj, err := leaseObject(lease)
		if err != nil {
			return false, "", err
		}
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return false, "another installer", nil
			}
			return false, "", fmt.Errorf("creating lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return true, l.Holder, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	lease := &coordv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease); err != nil {
		return false, "", fmt.Errorf("decoding lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder != "" && holder != l.Holder && !expired(lease, now()) {
		return false, holder, nil
	}
	if holder != l.Holder {
		lease.Spec.AcquireTime = &t
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &l.Holder, &secs, &t
	obj, err := leaseObject(lease)
	if err != nil {
		return false, "", err
	}
	if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return false, holder, nil
		}
		return false, "", fmt.Errorf("taking lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return true, l.Holder, nil
}

// expired reports whether the holder of lease stopped renewing it longer
// than its duration ago.
func expired(lease *coordv1.Lease, now time.Time) bool {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second))
}

// handBack clears the holder if it is still this installer, so the next
// node need not wait for the Lease to expire. A failure only costs that
// wait, so it is not an error of the run.
func (l *RestartLease) handBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	u, err := res.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	lease := &coordv1.Lease{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease) != nil ||
		lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.Holder {
		return
	}
	empty := ""
	lease.Spec.HolderIdentity = &empty
	if obj, err := leaseObject(lease); err == nil {
		_, _ = res.Update(ctx, obj, metav1.UpdateOptions{})
	}
}

func leaseObject(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// restartLock takes the RestartLease before a run's first restart and
// holds it to the run's end; a nil lease locks nothing.
type restartLock struct {
	lease   *RestartLease
	release func()
}

func (r *restartLock) take(ctx context.Context) error {
	if r == nil || r.lease == nil || r.release != nil {
		return nil
	}
	rel, err := r.lease.Acquire(ctx)
	if err != nil {
		return err
	}
	r.release = rel
	return nil
}

// done hands the Lease back, if the run took it.
func (r *restartLock) done() {
	if r != nil && r.release != nil {
		r.release()
		r.release = nil
	}
}
