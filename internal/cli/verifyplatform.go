package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// verifyReport is the part of verify's JSON report VerifyPlatform reads.
type verifyReport struct {
	Platform       string   `json:"platform"`
	Handler        string   `json:"handler"`
	Socket         string   `json:"socket"`
	RuntimeName    string   `json:"runtimeName"`
	RuntimeVersion string   `json:"runtimeVersion"`
	Live           bool     `json:"live"`
	Handlers       []string `json:"handlers"`
	Snapshotter    *struct {
		Name  string `json:"name"`
		Live  bool   `json:"live"`
		Error string `json:"error"`
	} `json:"snapshotter"`
}

// VerifyPlatform runs `verify --platform P -o json` (with --snapshotter
// for a platform whose snapshotter is a proxy plugin berth sets up, and
// --install-suffix for a side-by-side install's handler) through the binary's
// wiring and reads the report, for install and config --apply. The wiring
// verifies in-process in berth-cluster and in a child berth-cluster
// process in berth: its streams here are buffers, never the process's
// own, so the child never replaces the process (runDelegate) and every
// platform is verified.
func (g *Globals) VerifyPlatform(ctx context.Context, p platform.Platform, suffix configure.Suffix) (configure.Verification, error) {
	if g.verify == nil {
		return configure.Verification{}, errors.New("this build of berth cannot verify: run `berth verify` for each platform")
	}
	var out, errOut bytes.Buffer
	c := *g
	c.stdin, c.stdout, c.stderr, c.output = bytes.NewReader(nil), &out, &errOut, string(output.JSON)
	err := g.verify(ctx, &c, p, suffix)
	// What verify logged (-v) goes on; its closing "Error:" line becomes
	// the verification's error.
	var why string
	for line := range strings.Lines(errOut.String()) {
		if msg, ok := strings.CutPrefix(line, "Error: "); ok {
			why = strings.TrimSpace(msg)
			continue
		}
		io.WriteString(g.stderr, line)
	}
	// Verify's own status when it failed; a run that failed to report
	// without saying why is a failure too.
	code := errdefs.ExitFailure
	if err != nil {
		code = errdefs.ExitCode(err)
		if why == "" {
			why = err.Error()
		}
	}
	var r verifyReport
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil || r.Handler == "" {
		// No report: verify itself could not run (berth-cluster missing, a
		// usage error).
		if why == "" {
			why = fmt.Sprintf("verify printed no report: %q", out.String())
		}
		return configure.Verification{}, ExitErr(code, errors.New(why))
	}
	res := configure.Verification{Platform: p.String(), Handler: r.Handler, Live: r.Live, Socket: r.Socket, Handlers: r.Handlers}
	if sn := r.Snapshotter; sn != nil {
		res.Snapshotter = sn.Name
		if !sn.Live {
			res.Live, res.SnapshotterError = false, sn.Error
		}
	}
	if r.RuntimeName != "" {
		res.Runtime = strings.TrimSpace(r.RuntimeName + " " + r.RuntimeVersion)
	} else if !r.Live {
		// The runtime could not be asked: say why.
		res.Error = why
	}
	return res, nil
}
