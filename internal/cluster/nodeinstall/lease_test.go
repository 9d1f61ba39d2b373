package nodeinstall

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/testkit/testenv"
)

// leaseHolder reads the Lease's holder ("" when handed back).
func leaseHolder(t *testing.T, dyn dynamic.Interface, ns, name string) string {
	t.Helper()
	u, err := dyn.Resource(leasesResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading lease %s/%s: %v", ns, name, err)
	}
	l := &coordv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestRestartLease runs two nodes' installers' locks against the real API
// server with exactly the installer's RBAC: the second waits while the
// first holds the Lease, and takes it once it is handed back; a Lease its
// holder stopped renewing is taken over without waiting.
func TestRestartLease(t *testing.T) {
	testenv.Need(t)
	dyn := clientAs(t, "berth-node-installer-lease-test", installerRules)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ns = "default"

	t.Run("serialises", func(t *testing.T) {
		name := "restart-serialises"
		a := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-a", Poll: 20 * time.Millisecond}
		var waitedFor atomic.Value
		b := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-b", Poll: 20 * time.Millisecond,
			Waiting: func(h string) { waitedFor.Store(h) }}
		releaseA, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h := leaseHolder(t, dyn, ns, name); h != "node-a" {
			t.Fatalf("holder after a's acquire: %q", h)
		}
		gotB := make(chan func(), 1)
		go func() {
			rel, err := b.Acquire(ctx)
			if err != nil {
				t.Error(err)
				rel = func() {}
			}
			gotB <- rel
		}()
		// b polls every 20 ms; 15 polls without the Lease show it waits.
		select {
		case <-gotB:
			t.Fatal("b took the Lease while a held it")
		case <-time.After(300 * time.Millisecond):
		}
		if w, _ := waitedFor.Load().(string); w != "node-a" {
			t.Errorf("b waited for %q, want node-a", w)
		}
		releaseA()
		releaseA() // twice is harmless
		var releaseB func()
		select {
		case releaseB = <-gotB:
		case <-ctx.Done():
			t.Fatal("b never took the Lease a handed back")
		}
		if h := leaseHolder(t, dyn, ns, name); h != "node-b" {
			t.Errorf("holder after a's release: %q, want node-b", h)
		}
		releaseB()
		if h := leaseHolder(t, dyn, ns, name); h != "" {
			t.Errorf("holder after both released: %q", h)
		}
	})

	t.Run("expired holder", func(t *testing.T) {
		name := "restart-expired"
		dead := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "dead-node", Duration: time.Minute,
			Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }}
		if held, _, err := dead.tryAcquire(ctx, name, time.Minute, dead.Now); err != nil || !held {
			t.Fatalf("setting up a stale lease: held %v, %v", held, err)
		}
		waited := false
		b := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-b", Poll: 20 * time.Millisecond,
			Waiting: func(string) { waited = true }}
		rel, err := b.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rel()
		if waited || leaseHolder(t, dyn, ns, name) != "node-b" {
			t.Errorf("stale lease: waited %v, holder %q", waited, leaseHolder(t, dyn, ns, name))
		}
	})

	t.Run("gives up with the context", func(t *testing.T) {
		name := "restart-timeout"
		a := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-a"}
		rel, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rel()
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		b := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-b", Poll: 20 * time.Millisecond}
		if _, err := b.Acquire(short); err == nil {
			t.Fatal("b took a held Lease")
		} else if got := err.Error(); !strings.Contains(got, "held by node-a") {
			t.Errorf("error %q does not name the holder", got)
		}
	})
}

// slotRules are the installer's rules with list on Leases, which a lock
// of several slots needs.
var slotRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "list"}},
}

// slotHolders reads the holders of the slots of lock name that hold
// an unexpired slot (handed-back slots have holder "").
func slotHolders(t *testing.T, dyn dynamic.Interface, ns string, l *RestartLease) map[string]string {
	t.Helper()
	list, err := dyn.Resource(leasesResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range list.Items {
		if !l.isSlot(u.GetName()) {
			continue
		}
		lease := &coordv1.Lease{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease); err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" && !expired(lease, time.Now()) {
			got[u.GetName()] = *h
		}
	}
	return got
}

// TestRestartLeaseSlots runs locks of several slots (maxConcurrentRestarts)
// against the real API server with the installer's RBAC plus list: many
// contending holders never exceed the slots yet do run side by side; a
// dead holder's expired slot is taken without waiting while live ones are
// respected; a restarted installer takes back its own slot, never a
// second one.
func TestRestartLeaseSlots(t *testing.T) {
	testenv.Need(t)
	dyn := clientAs(t, "berth-node-installer-slots-test", slotRules)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ns = "default"

	for _, tc := range []struct {
		name           string
		slots, holders int
	}{
		{"one slot", 1, 6},
		{"three slots", 3, 16},
		{"eight slots", 8, 24},
	} {
		t.Run("contention/"+tc.name, func(t *testing.T) {
			name := "restart-contend-" + strconv.Itoa(tc.slots)
			var inside, most atomic.Int32
			errs := make(chan error, tc.holders)
			for i := range tc.holders {
				l := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-" + strconv.Itoa(i),
					Slots: tc.slots, Poll: 5 * time.Millisecond}
				go func() {
					rel, err := l.Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					// The simulated restart: long enough for waiters to
					// poll many times while it runs.
					time.Sleep(60 * time.Millisecond)
					inside.Add(-1)
					rel()
					errs <- nil
				}()
			}
			for range tc.holders {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if m := int(most.Load()); m > tc.slots || (tc.slots > 1 && m < 2) {
				t.Errorf("at most %d holders at once, want <= %d (and more than one when slots > 1)", m, tc.slots)
			}
			base := &RestartLease{Name: name, Slots: tc.slots}
			if h := slotHolders(t, dyn, ns, base); len(h) != 0 {
				t.Errorf("holders after every release: %v", h)
			}
			// Slot names: Name, Name-1, ...; one slot is the single Lease.
			list, err := dyn.Resource(leasesResource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, u := range list.Items {
				if u.GetName() == name || strings.HasPrefix(u.GetName(), name+"-") {
					names = append(names, u.GetName())
				}
			}
			if len(names) > tc.slots || !slices.Contains(names, name) {
				t.Errorf("slot leases %v, want %s and at most %d in all", names, name, tc.slots)
			}
		})
	}

	t.Run("dead holder frees its slot", func(t *testing.T) {
		name := "restart-slots-dead"
		stale := func() time.Time { return time.Now().Add(-10 * time.Minute) }
		dead := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "dead-node", Duration: time.Minute, Now: stale}
		if held, _, err := dead.tryAcquire(ctx, dead.slotName(1), time.Minute, stale); err != nil || !held {
			t.Fatalf("setting up a stale slot: held %v, %v", held, err)
		}
		// Slot 0 is live, so node-b can only get the dead one's.
		live := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "live-node", Slots: 2}
		if held, _, err := live.tryAcquire(ctx, name, time.Minute, time.Now); err != nil || !held {
			t.Fatalf("setting up a live slot: held %v, %v", held, err)
		}
		var waited atomic.Bool
		b := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-b", Slots: 2, Poll: 10 * time.Millisecond,
			Waiting: func(string) { waited.Store(true) }}
		relB, err := b.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer relB()
		got := slotHolders(t, dyn, ns, b)
		if waited.Load() || got[name] != "live-node" || got[name+"-1"] != "node-b" {
			t.Errorf("after a dead holder's slot expired: waited %v, holders %v; want live-node on %s and node-b on %s-1", waited.Load(), got, name, name)
		}
		// Both slots live: a third waits, naming both holders.
		var waitedFor atomic.Value
		c := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-c", Slots: 2, Poll: 10 * time.Millisecond,
			Waiting: func(h string) { waitedFor.Store(h) }}
		short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
		defer stop()
		if _, err := c.Acquire(short); err == nil {
			t.Fatal("a third holder took one of two live slots")
		}
		if w, _ := waitedFor.Load().(string); w != "live-node, node-b" {
			t.Errorf("c waited for %q, want \"live-node, node-b\"", w)
		}
	})

	t.Run("restarted installer takes its own slot", func(t *testing.T) {
		name := "restart-slots-own"
		first := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-a", Slots: 4}
		if _, err := first.Acquire(ctx); err != nil { // never released: the pod died
			t.Fatal(err)
		}
		before := slotHolders(t, dyn, ns, first)
		again := &RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: "node-a", Slots: 4}
		rel, err := again.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after := slotHolders(t, dyn, ns, again)
		if len(before) != 1 || !maps.Equal(before, after) {
			t.Errorf("holders %v, then after the restarted pod's acquire %v; want the same single slot", before, after)
		}
		rel()
		if h := slotHolders(t, dyn, ns, again); len(h) != 0 {
			t.Errorf("holders after release: %v", h)
		}
	})
}

func TestSummariseHolders(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"b", "a"}, "a, b"},
		{[]string{"n1", "n1", "n2"}, "n1, n2"},
		{[]string{"e", "d", "c", "b", "a"}, "a, b, c and 2 more"},
	} {
		if got := summarise(tc.in); got != tc.want {
			t.Errorf("summarise(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestIsSlot(t *testing.T) {
	l := &RestartLease{Name: "r", Slots: 3}
	for name, want := range map[string]bool{"r": true, "r-1": true, "r-2": true, "r-3": false, "r-0": false, "r-01": false, "r-x": false, "rr-1": false, "q": false} {
		if got := l.isSlot(name); got != want {
			t.Errorf("isSlot(%q) = %v, want %v", name, got, want)
		}
	}
}
