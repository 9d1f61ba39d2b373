package nodeinstall

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
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
		if held, _, err := dead.tryAcquire(ctx, time.Minute, dead.Now); err != nil || !held {
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
