package discover

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
)

func TestPluginsOfflineNeverExecutes(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	s := offlineSession(t, map[string]string{
		"etc/berth/features.d/10-site": "# +expiry-time=2030-01-01T00:00:00Z\nsite.example.com/kbs=https://kbs:8080\n",
		"etc/berth/features.d/20-old":  "# +expiry-time=2020-01-01T00:00:00Z\nold=1\n",
		"etc/berth/features.d/30-bad":  "ok=1\nnot ok\n",
		"etc/berth/checks.d/touch":     "#!/bin/sh\ntouch " + marker + "\n",
	}, Options{ExecPlugins: true, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err := os.Chmod(filepath.Join(s.root.Path(), "etc/berth/checks.d/touch"), 0o755); err != nil {
		t.Fatal(err)
	}
	var f facts.Facts
	runPlugins(context.Background(), s, &f)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an executable check ran from an offline root")
	}
	p := f.Plugins
	if len(p.Features) != 1 || p.Features["site.example.com/kbs"] != "https://kbs:8080" || p.FeatureSources["site.example.com/kbs"] != "etc/berth/features.d/10-site" {
		t.Errorf("features %v sources %v", p.Features, p.FeatureSources)
	}
	if len(p.Errors) != 1 || p.Errors[0].Name != "30-bad" || !strings.Contains(p.Errors[0].Message, "line 2") {
		t.Errorf("errors %+v", p.Errors)
	}
	if len(p.Notes) != 1 || p.Notes[0].Name != "20-old" {
		t.Errorf("notes %+v", p.Notes)
	}
	if got := unknownsOf(s)["plugins.findings"]; !strings.HasPrefix(got, facts.ReasonOffline) {
		t.Errorf("unknown plugins.findings = %q", got)
	}
}

func TestPluginsMountedLiveRootDoesNotExecute(t *testing.T) {
	dir := hostTree(t, map[string]string{"etc/berth/checks.d/x": "#!/bin/sh\nexit 1\n"})
	s := liveSession(t, dir, Options{ExecPlugins: true})
	var f facts.Facts
	runPlugins(context.Background(), s, &f)
	if len(f.Plugins.Errors) != 0 || unknownsOf(s)["plugins.findings"] != "not run: executable checks run only on the live / root" {
		t.Errorf("plugins %+v unknown %v", f.Plugins, unknownsOf(s))
	}
}

func TestPluginsDisabledByDefault(t *testing.T) {
	s := liveSession(t, "/", Options{})
	var f facts.Facts
	runPlugins(context.Background(), s, &f)
	if _, ok := unknownsOf(s)["plugins.findings"]; ok || f.Plugins.Findings != nil {
		t.Errorf("plugins %+v unknown %v", f.Plugins, unknownsOf(s))
	}
}

func TestRunChecksMerges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checks.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"attest": `echo '{"schemaVersion":1,"facts":{"zone":"eu-2"},"findings":[{"id":"site.attestation.reachable","status":"fail","title":"KBS unreachable","message":"connection refused","remedy":"start the KBS"},{"id":"bad","status":"pass","title":"x"}]}'`,
		"broken": "exit 2",
	}
	for n, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := liveSession(t, "/", Options{PluginTimeout: time.Minute})
	p := facts.Plugins{Features: map[string]string{"zone": "eu-1"}, FeatureSources: map[string]string{"zone": "etc/berth/features.d/10"}}
	s.runChecks(context.Background(), &p, dir)
	if p.Features["zone"] != "eu-2" || p.FeatureSources["zone"] != "etc/berth/checks.d/attest" {
		t.Errorf("features %v sources %v", p.Features, p.FeatureSources)
	}
	want := facts.PluginFinding{Plugin: "attest", ID: "site.attestation.reachable", Status: "fail", Title: "KBS unreachable", Message: "connection refused", Remedy: "start the KBS"}
	if len(p.Findings) != 1 || p.Findings[0] != want {
		t.Errorf("findings %+v", p.Findings)
	}
	if len(p.Errors) != 2 || p.Errors[0].Name != "attest" || !strings.Contains(p.Errors[0].Message, `invalid id "bad"`) ||
		p.Errors[1].Name != "broken" || !strings.Contains(p.Errors[1].Message, "check etc/berth/checks.d/broken: exited with status 2") {
		t.Errorf("errors %+v", p.Errors)
	}
}
