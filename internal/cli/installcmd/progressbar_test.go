package installcmd

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// TestBarProgress feeds the terminal display a sequence of fetch events
// at given times of a fake clock and compares the bytes it wrote with a
// golden file, and the screen those bytes leave (replayed on a minimal
// terminal) with what a user should see at the end.
func TestBarProgress(t *testing.T) {
	type at struct {
		t time.Duration
		e fetch.Event
	}
	ev := func(ms int, name string, ph fetch.Phase, n, total int64) at {
		return at{time.Duration(ms) * time.Millisecond, fetch.Event{Component: name, Phase: ph, Bytes: n, Total: total}}
	}
	const MiB = 1 << 20
	for _, tc := range []struct {
		name   string
		total  int64
		width  int
		events []at
		// afterFinish are events that arrive once finish has run.
		afterFinish []at
		screen      []string
	}{
		{
			name: "one-component", total: 200 * MiB,
			events: []at{
				ev(0, "qemu", fetch.PhaseStart, 0, 200*MiB),
				ev(10, "qemu", fetch.PhaseProgress, 10*MiB, 200*MiB),
				ev(150, "qemu", fetch.PhaseProgress, 50*MiB, 200*MiB),
				ev(300, "qemu", fetch.PhaseProgress, 150*MiB, 200*MiB),
				ev(320, "qemu", fetch.PhaseDone, 200*MiB, 200*MiB),
			},
			screen: []string{
				"qemu                     [================] 200.0 MiB / 200.0 MiB verified",
				"total                    [================] 200.0 MiB / 200.0 MiB 100%",
			},
		},
		{
			// Reads every few milliseconds draw one frame per refresh
			// interval, not one per read.
			name: "throttled", total: 100 * MiB,
			events: []at{
				ev(0, "kernel", fetch.PhaseStart, 0, 100*MiB),
				ev(20, "kernel", fetch.PhaseProgress, 1*MiB, 100*MiB),
				ev(40, "kernel", fetch.PhaseProgress, 2*MiB, 100*MiB),
				ev(60, "kernel", fetch.PhaseProgress, 3*MiB, 100*MiB),
				ev(100, "kernel", fetch.PhaseProgress, 4*MiB, 100*MiB),
				ev(120, "kernel", fetch.PhaseProgress, 5*MiB, 100*MiB),
				ev(199, "kernel", fetch.PhaseProgress, 6*MiB, 100*MiB),
				ev(200, "kernel", fetch.PhaseProgress, 7*MiB, 100*MiB),
			},
			screen: []string{
				"kernel                   [=               ] 7.0 MiB / 100.0 MiB incomplete",
				"total                    [=               ] 7.0 MiB / 100.0 MiB incomplete",
			},
		},
		{
			// A retry, a fallback to the next source, a second component
			// that never finishes: the run failed, and the lines say which
			// component was left incomplete.
			name: "several-one-incomplete", total: 300 * 1024,
			events: []at{
				ev(0, "qemu", fetch.PhaseStart, 0, 200*1024),
				ev(200, "qemu", fetch.PhaseProgress, 100*1024, 200*1024),
				ev(400, "qemu", fetch.PhaseRetry, 100*1024, 200*1024),
				ev(600, "qemu", fetch.PhaseFallback, 100*1024, 200*1024),
				ev(800, "qemu", fetch.PhaseProgress, 150*1024, 200*1024),
				ev(900, "qemu", fetch.PhaseDone, 200*1024, 200*1024),
				ev(1000, "shim", fetch.PhaseStart, 0, 100*1024),
				ev(1200, "shim", fetch.PhaseProgress, 40*1024, 100*1024),
			},
			afterFinish: []at{ev(1300, "shim", fetch.PhaseDone, 100*1024, 100*1024)},
			screen: []string{
				"qemu                     [================] 200.0 KiB / 200.0 KiB verified",
				"shim                     [======          ] 40.0 KiB / 100.0 KiB incomplete",
				"total                    [============    ] 240.0 KiB / 300.0 KiB incomplete",
			},
		},
		{
			// Lines are cut one column short of the terminal's width, so
			// none wraps and cursor-up lands on the first line.
			name: "narrow-terminal", total: 1000, width: 40,
			events: []at{
				ev(0, "kata-containers-static-with-a-long-name", fetch.PhaseStart, 0, 1000),
				ev(200, "kata-containers-static-with-a-long-name", fetch.PhaseProgress, 500, 1000),
			},
			screen: []string{
				"kata-containers-static-~ [========     ",
				"total                    [========     ",
			},
		},
		{
			// The longest line (a name at the column's width, sizes near
			// a GiB, "incomplete") fits an 80-column terminal uncut.
			name: "widest-line", total: 2047 * MiB, width: 80,
			events: []at{
				ev(0, "containerd-shim-kata-v2x", fetch.PhaseStart, 0, 1023*MiB+900*1024),
				ev(200, "containerd-shim-kata-v2x", fetch.PhaseProgress, 1023*MiB, 1023*MiB+900*1024),
				ev(300, "kernel", fetch.PhaseDone, 1023*MiB+900*1024, 1023*MiB+900*1024),
			},
			screen: []string{
				"containerd-shim-kata-v2x [=============== ] 1023.0 MiB / 1023.9 MiB incomplete",
				"kernel                   [================] 1023.9 MiB / 1023.9 MiB verified",
				"total                    [=============== ] 2.0 GiB / 2.0 GiB incomplete",
			},
		},
		{
			// Already installed: no component starts, and the display
			// writes nothing at all.
			name: "nothing-fetched", total: 300,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			b := newBarProgress(&buf, tc.total)
			var now time.Time
			b.now = func() time.Time { return now }
			b.width = tc.width
			for _, a := range tc.events {
				now = time.Unix(0, 0).Add(a.t)
				b.event(a.e)
			}
			b.finish()
			for _, a := range tc.afterFinish {
				now = time.Unix(0, 0).Add(a.t)
				b.event(a.e)
			}
			b.finish()
			goldenfile.Assert(t, filepath.Join("testdata/progress", tc.name+".golden"), buf.Bytes())
			if got := replayTerminal(t, buf.Bytes()); !equalLines(got, tc.screen) {
				t.Errorf("screen after the last frame:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.screen, "\n"))
			}
		})
	}
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// replayTerminal is the screen a terminal shows after out: it knows
// printable ASCII, carriage return, newline, cursor up (CSI n A) and erase
// to end of line (CSI K), the only sequences barProgress may write; any
// other byte fails the test. The trailing empty line the cursor rests on
// is dropped.
func replayTerminal(t *testing.T, out []byte) []string {
	t.Helper()
	var screen [][]byte
	row, col := 0, 0
	for i := 0; i < len(out); i++ {
		for row >= len(screen) {
			screen = append(screen, nil)
		}
		switch c := out[i]; {
		case c == '\r':
			col = 0
		case c == '\n':
			row, col = row+1, 0
		case c == 0x1b:
			j := i + 2
			if j > len(out) || out[i+1] != '[' {
				t.Fatalf("escape at %d is not a CSI: %q", i, out[i:])
			}
			for j < len(out) && out[j] >= '0' && out[j] <= '9' {
				j++
			}
			if j >= len(out) {
				t.Fatalf("unterminated CSI at %d", i)
			}
			n := 1
			if j > i+2 {
				n, _ = strconv.Atoi(string(out[i+2 : j]))
			}
			switch out[j] {
			case 'A':
				if n > row {
					t.Fatalf("cursor up %d from row %d leaves the display", n, row)
				}
				row -= n
			case 'K':
				screen[row] = screen[row][:min(col, len(screen[row]))]
			default:
				t.Fatalf("unexpected CSI %q", out[i:j+1])
			}
			i = j
		case c >= 0x20 && c < 0x7f:
			for len(screen[row]) <= col {
				screen[row] = append(screen[row], ' ')
			}
			screen[row][col] = c
			col++
		default:
			t.Fatalf("unexpected byte %#x at %d", c, i)
		}
	}
	var lines []string
	for _, l := range screen {
		lines = append(lines, string(l))
	}
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	return lines
}
