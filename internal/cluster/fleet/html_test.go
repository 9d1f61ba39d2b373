package fleet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"berth.dev/berth/internal/testkit"
)

// chromium is the browser .ci/tools.sh installs (Debian's chromium).
const chromium = "/usr/bin/chromium"

// TestHTMLRendersInChromium opens the fleet page in headless Chromium with
// networking cut off, fails on any console error or exception, checks the
// heat map and the outliers are on the page and the group click works, and
// saves a screenshot in the test's temp directory (BERTH_SCREENSHOT_DIR
// keeps it somewhere else).
func TestHTMLRendersInChromium(t *testing.T) {
	testkit.NeedsTools(t, "Chromium")
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s: %v; run .ci/tools.sh (installs Debian's chromium)", chromium, err)
	}
	nodes, bad := fleetFixture(t)
	a := Analyze(nodes, bad)
	var page bytes.Buffer
	if err := WriteHTML(&page, a, epoch); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Any request leaving the page fails: the page must need none.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	// Subscribe before navigating so that no message is lost.
	cctx, stopConsole := context.WithCancel(ctx)
	msgs := chromedp.Console(cctx)
	var problems []string
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				problems = append(problems, m.String())
			}
		}
	}()

	url := "file://" + file
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#matrix")),
		chromedp.Click(chromedp.CSS(`th.g[data-g="0"]`)),
		chromedp.SetValue(chromedp.CSS("#filter"), "snp"),
	); err != nil {
		t.Fatalf("rendering %s in %s: %v", url, chromium, err)
	}
	title := run(t, ctx, chromedp.Title())
	cells := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#matrix td.c").length`))
	outliers := run(t, ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("li")).filter(li => li.textContent.includes("genoa-4")).length`))
	members := run(t, ctx, chromedp.Text(chromedp.CSS("#members")))
	failures := run(t, ctx, chromedp.Text(chromedp.CSS("#failures")))
	installRows := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#install tbody tr").length`))
	shot := run(t, ctx, chromedp.FullScreenshot(100))
	stopConsole()
	<-collected

	for _, p := range problems {
		t.Errorf("page: %s", p)
	}
	if !strings.Contains(title, "7 nodes") {
		t.Errorf("title %q", title)
	}
	if want := len(a.Platforms) * len(a.Groups); cells != want {
		t.Errorf("%d heat map cells, want %d", cells, want)
	}
	if outliers != 1 {
		t.Errorf("the genoa-4 outlier is listed %d times, want 1", outliers)
	}
	if !strings.Contains(members, "genoa-1, genoa-2, genoa-3, genoa-4") {
		t.Errorf("clicking G1 shows %q", members)
	}
	// The failed node is on the page with its error.
	if !strings.Contains(failures, "genoa-3") || !strings.Contains(failures, "containerd.service is not active") {
		t.Errorf("failed installs: %q", failures)
	}
	if installRows != len(a.Install) {
		t.Errorf("%d install status rows, want %d", installRows, len(a.Install))
	}
	out := dir
	if d := os.Getenv("BERTH_SCREENSHOT_DIR"); d != "" {
		out = d
	}
	png := filepath.Join(out, "fleet.png")
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", png, len(shot))
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return v
}
