package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/testkit/testenv"
)

// lockedBuffer is a log sink the agent and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// setInstallAnnotation writes the node-installer's record as raw text ("":
// removes it).
func setInstallAnnotation(t *testing.T, cs kubernetes.Interface, node, v string) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	if v == "" {
		delete(n.Annotations, v1alpha1.InstallStatusAnnotation)
	} else {
		n.Annotations[v1alpha1.InstallStatusAnnotation] = v
	}
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInstallStatusPublished: the agent copies the node-installer's record
// from its Node into the NodeReport, writes nothing while it is unchanged,
// follows a change, and publishes the rest of the report without a record
// it cannot read, saying why.
func TestInstallStatusPublished(t *testing.T) {
	testenv.Need(t)
	cs, dyn := admin(t)
	const node = "install-1"
	createNodes(t, cs, []string{node})
	logs := &lockedBuffer{}
	s := newSim(t, env.Admin, node, "snp-genoa-k3s-ready", func(c *Config) {
		c.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx := context.Background()
	encode := func(s v1alpha1.InstallStatus) string {
		v, err := nodereport.EncodeInstall(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	failedRun := v1alpha1.InstallStatus{
		Version: "3.24.0", Digest: "sha256:" + strings.Repeat("ab", 32), Time: metav1.NewTime(epoch),
		Platforms: []v1alpha1.PlatformInstall{
			{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallFailed, Error: "fetching kata-static: 404 Not Found"},
			{Name: "k3s-qemu-tdx", Handler: "kata-qemu-tdx", State: v1alpha1.InstallNotReady, Error: "tee.tdx.cpu: the CPU is not an Intel CPU"},
		},
	}
	installedRun := failedRun
	installedRun.Time = metav1.NewTime(epoch.Add(time.Hour))
	installedRun.Platforms = []v1alpha1.PlatformInstall{
		{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallInstalled},
		failedRun.Platforms[1],
	}
	published := func(t *testing.T) *v1alpha1.InstallStatus {
		t.Helper()
		u := getReport(t, dyn, node)
		var r v1alpha1.Report
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["report"].(map[string]any), &r); err != nil {
			t.Fatal(err)
		}
		if r.ContentHash != nodereport.Hash(r) {
			t.Errorf("published hash %s does not match the content", r.ContentHash)
		}
		return r.Install
	}

	for _, step := range []struct {
		name       string
		annotation string // "-": leave as it is
		writes     int64
		want       *v1alpha1.InstallStatus
		log        string
	}{
		{name: "no record yet (labels and report)", annotation: "", writes: 2},
		{name: "a failed run", annotation: encode(failedRun), writes: 1, want: &failedRun},
		{name: "quiet: unchanged record", annotation: "-", writes: 0, want: &failedRun},
		{name: "rerun installed it", annotation: encode(installedRun), writes: 1, want: &installedRun},
		{name: "garbled record", annotation: `{"schema":1,"platforms":[{`, writes: 1, log: "ignoring the node-installer's install status"},
		{name: "quiet: still garbled", annotation: "-", writes: 0},
		{name: "oversized record", annotation: `{"schema":1,"version":"` + strings.Repeat("x", 10<<10) + `"}`, writes: 0, log: "more than"},
		{name: "record of a newer schema", annotation: `{"schema":2}`, writes: 0, log: "schema 2"},
		{name: "record back", annotation: encode(installedRun), writes: 1, want: &installedRun},
		{name: "record removed (cleanup)", annotation: "", writes: 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.annotation != "-" {
				setInstallAnnotation(t, cs, node, step.annotation)
			}
			s.writes.Store(0)
			if err := s.a.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
			if w := s.writes.Load(); w != step.writes {
				t.Errorf("%d writes, want %d", w, step.writes)
			}
			got := published(t)
			var want *v1alpha1.InstallStatus
			if step.want != nil {
				want = new(nodereport.NormalizeInstall(*step.want))
			}
			if nodereport.Hash(v1alpha1.Report{Install: got}) != nodereport.Hash(v1alpha1.Report{Install: want}) {
				t.Errorf("published install %+v, want %+v", got, want)
			}
			if got != nil && got.Platforms[0].State == v1alpha1.InstallFailed && got.Platforms[0].Error == "" {
				t.Error("a failed platform without its error")
			}
			if step.log != "" && !strings.Contains(logs.String(), step.log) {
				t.Errorf("log does not say %q:\n%s", step.log, logs.String())
			}
		})
	}
}
