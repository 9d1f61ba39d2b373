package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/testproc"
)

// BenchmarkQuietCycle is one quiet interval of an agent on this machine's
// own root, as the DaemonSet runs it after its first publish: discovery
// with the kernel log followed and the file cache, the checks, the report
// and the two reads of the real API server that find nothing to write.
// Its CPU profile shows where a quiet interval's time goes; cpu-ns/op is
// this process's alone (the API server is a child), and wall time is
// mostly the client's request budget (20 per second).
func BenchmarkQuietCycle(b *testing.B) {
	testenv.Need(b)
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	opt := discover.Options{KernelLog: discover.NewKernelLogFollower(root), Cache: discover.NewFileCache()}
	defer opt.KernelLog.Close()
	cs, _ := admin(b)
	node := fmt.Sprintf("bench-quiet-%d", time.Now().UnixNano())
	createNodes(b, cs, []string{node})
	s := newSim(b, env.Admin, node, "snp-genoa-k3s-ready", func(c *Config) {
		c.Evaluate = Evaluator(root, opt, nil)
	})
	ctx := context.Background()
	if err := s.a.Cycle(ctx); err != nil {
		b.Fatal(err)
	}
	w := s.writes.Load()
	b.ReportAllocs()
	cpu0 := testproc.CPUTime(b)
	for b.Loop() {
		if err := s.a.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if got := s.writes.Load() - w; got != 0 {
		b.Fatalf("%d writes in %d quiet cycles, want 0", got, b.N)
	}
}
