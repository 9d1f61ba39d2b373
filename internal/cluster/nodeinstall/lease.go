package nodeinstall

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
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
//
// Slots > 1 lets that many nodes restart at once (maxConcurrentRestarts):
// the lock is then Slots independent Leases, Name (slot 0, the single
// Lease of Slots 1, so that a change of Slots never releases a node held
// under the old setting) and Name-1 ... Name-(Slots-1). Each slot is an
// ordinary Lease with the same expiry and renewal, taken by an update
// that the API server refuses on a stale resourceVersion, so a slot never
// has two holders; an installer holds at most one slot and takes back its
// own after a crash. A dead holder frees its slot when the slot expires,
// exactly as with one Lease. A waiter reads all slots with one LIST per
// poll (the Role's list verb on Leases), so waiting costs the API server
// the same one request per poll whatever Slots is.
type RestartLease struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace and Name name the Lease (the installer's namespace).
	Namespace, Name string
	// Holder identifies this node's installer (the node name).
	Holder string
	// Slots is how many nodes may hold the lock at once (0 or 1: one,
	// the single Lease Name).
	Slots int
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
	slot := l.Name
	for {
		var held bool
		var holder string
		var err error
		if l.Slots > 1 {
			slot, held, holder, err = l.tryAcquireSlot(ctx, d, now)
		} else {
			held, holder, err = l.tryAcquire(ctx, slot, d, now)
		}
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
		// Jittered (poll/2 to 3 poll/2): waiters that started together,
		// as a DaemonSet's first rollout starts them, would otherwise
		// poll in step, and a released slot would stay free until the
		// next common tick (3.3x the bound in bench/cluster.sh).
		case <-time.After(poll/2 + rand.N(poll)):
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
				_, _, _ = l.tryAcquire(rctx, slot, d, now)
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
		l.handBack(context.WithoutCancel(ctx), slot)
	}, nil
}

// tryAcquire takes or renews the Lease when it is free, expired or
// already this holder's; otherwise it reports the holder. Conflicts (two
// installers racing for a free Lease) are lost by all but one: the API
// server refuses an update of a stale resourceVersion.
func (l *RestartLease) tryAcquire(ctx context.Context, name string, d time.Duration, now func() time.Time) (bool, string, error) {
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return l.create(ctx, name, d, now)
	}
	if err != nil {
		return false, "", fmt.Errorf("reading lease %s/%s: %w", l.Namespace, name, err)
	}
	lease := &coordv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease); err != nil {
		return false, "", fmt.Errorf("decoding lease %s/%s: %w", l.Namespace, name, err)
	}
	return l.take(ctx, lease, d, now)
}

// create takes slot name by creating its Lease; one that another
// installer created first is held.
func (l *RestartLease) create(ctx context.Context, name string, d time.Duration, now func() time.Time) (bool, string, error) {
	t := metav1.NewMicroTime(now())
	secs := int32(d / time.Second)
	lease := &coordv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Namespace},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &l.Holder, LeaseDurationSeconds: &secs, AcquireTime: &t, RenewTime: &t},
	}
	obj, err := leaseObject(lease)
	if err != nil {
		return false, "", err
	}
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, "another installer", nil
		}
		return false, "", fmt.Errorf("creating lease %s/%s: %w", l.Namespace, name, err)
	}
	return true, l.Holder, nil
}

// take updates lease (as read, with its resourceVersion) to this holder
// when it is free, expired or already this holder's; otherwise it reports
// the holder.
func (l *RestartLease) take(ctx context.Context, lease *coordv1.Lease, d time.Duration, now func() time.Time) (bool, string, error) {
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	t := metav1.NewMicroTime(now())
	secs := int32(d / time.Second)
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
		return false, "", fmt.Errorf("taking lease %s/%s: %w", l.Namespace, lease.Name, err)
	}
	return true, l.Holder, nil
}

// slotName is the Lease of slot i: Name itself for slot 0.
func (l *RestartLease) slotName(i int) string {
	if i == 0 {
		return l.Name
	}
	return l.Name + "-" + strconv.Itoa(i)
}

// tryAcquireSlot reads every slot with one LIST and takes the one this
// holder already holds, else a free or expired one, starting at a slot
// picked by the holder's name so that waiters who see the same free
// slots mostly try different ones. It returns the slot taken, or the
// holders it waits for.
func (l *RestartLease) tryAcquireSlot(ctx context.Context, d time.Duration, now func() time.Time) (string, bool, string, error) {
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false, "", fmt.Errorf("listing leases in %s for %s: %w", l.Namespace, l.Name, err)
	}
	slots := make(map[string]*coordv1.Lease, l.Slots)
	for i := range list.Items {
		u := &list.Items[i]
		if !l.isSlot(u.GetName()) {
			continue
		}
		lease := &coordv1.Lease{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease); err != nil {
			return "", false, "", fmt.Errorf("decoding lease %s/%s: %w", l.Namespace, u.GetName(), err)
		}
		slots[u.GetName()] = lease
	}
	// This installer's own slot first (a restarted pod of a node that
	// held one), so that a node never holds two.
	for name, lease := range slots {
		if h := lease.Spec.HolderIdentity; h != nil && *h == l.Holder {
			held, _, err := l.take(ctx, lease, d, now)
			if err != nil || held {
				return name, held, l.Holder, err
			}
		}
	}
	hash := fnv.New32a()
	_, _ = hash.Write([]byte(l.Holder))
	start := int(hash.Sum32() % uint32(l.Slots))
	var holders []string
	for k := range l.Slots {
		name := l.slotName((start + k) % l.Slots)
		lease, ok := slots[name]
		var held bool
		var holder string
		var err error
		if !ok {
			held, holder, err = l.create(ctx, name, d, now)
		} else {
			held, holder, err = l.take(ctx, lease, d, now)
		}
		if err != nil || held {
			return name, held, holder, err
		}
		holders = append(holders, holder)
	}
	return "", false, summarise(holders), nil
}

// isSlot reports whether name is one of this lock's slots.
func (l *RestartLease) isSlot(name string) bool {
	if name == l.Name {
		return true
	}
	rest, ok := strings.CutPrefix(name, l.Name+"-")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(rest)
	return err == nil && i > 0 && i < l.Slots && strconv.Itoa(i) == rest
}

// summarise names the holders a waiter waits for, the first three in
// order and a count of the rest, so that a waiter's log line stays short
// at any Slots.
func summarise(holders []string) string {
	slices.Sort(holders)
	holders = slices.Compact(holders)
	if len(holders) <= 3 {
		return strings.Join(holders, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(holders[:3], ", "), len(holders)-3)
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
func (l *RestartLease) handBack(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := l.Client.Resource(leasesResource).Namespace(l.Namespace)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
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
