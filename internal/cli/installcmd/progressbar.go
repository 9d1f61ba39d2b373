package installcmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"berth.dev/berth/internal/node/fetch"
)

// barProgress draws install's and bundle's progress on a terminal: one
// line per component, in the order the components started, and a total
// line below them, all redrawn in place. It is used only when stderr is a
// terminal; elsewhere progress is the plain lines of progress.
//
// It is a few lines of our own rather than a progress-bar library because
// the one berth used (mpb: a regexp compiled at initialisation to strip
// ANSI sequences, rune-width tables) added 8% to the instructions of every
// command's start-up, `berth version` included, for a display only install
// and bundle show. Its lines fit 80 columns: component names are cut at
// barNameWidth.
type barProgress struct {
	mu sync.Mutex
	w  io.Writer
	// width is the terminal's width in columns; a longer line is cut, since
	// a line that wraps would take two rows and the next frame's cursor-up
	// would land one row short. 0 means unknown: lines are not cut.
	width int
	// now and every throttle redraws on byte counts: a download reports
	// every read, far more often than a terminal needs a frame. A phase
	// change is drawn at once.
	now      func() time.Time
	every    time.Duration
	drawnAt  time.Time
	drawn    int // lines of the last frame, where the next one starts
	last     []byte
	rows     []*barRow
	byName   map[string]*barRow
	total    int64
	finished bool
}

// barRow is one component's line.
type barRow struct {
	name         string
	bytes, total int64
	state        barState
}

// barState is what a line says in place of its percentage.
type barState int

const (
	barActive barState = iota
	barRetrying
	barVerified
	// barIncomplete is a component the run ended without: a failure or an
	// interruption elsewhere stopped it.
	barIncomplete
)

const (
	barNameWidth = 24
	barCells     = 16
	barRefresh   = 100 * time.Millisecond
)

// newBarProgress returns the display of a fetch of total bytes, drawn on w
// (a terminal).
func newBarProgress(w io.Writer, total int64) *barProgress {
	width := 0
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			width = cols
		}
	}
	return &barProgress{w: w, width: width, now: time.Now, every: barRefresh, byName: map[string]*barRow{}, total: total}
}

// event records a fetch event and redraws when the display is due.
func (b *barProgress) event(e fetch.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	r := b.byName[e.Component]
	if r == nil {
		r = &barRow{name: e.Component, total: e.Total}
		b.byName[e.Component] = r
		b.rows = append(b.rows, r)
	}
	if e.Total > 0 {
		r.total = e.Total
	}
	switch e.Phase {
	case fetch.PhaseProgress:
		r.bytes, r.state = e.Bytes, barActive
		if b.drawn > 0 && b.now().Sub(b.drawnAt) < b.every {
			return
		}
	case fetch.PhaseRetry:
		r.bytes, r.state = e.Bytes, barRetrying
	case fetch.PhaseFallback:
		r.state = barActive
	case fetch.PhaseDone:
		r.bytes, r.state = r.total, barVerified
	}
	b.draw()
}

// finish draws the last frame, the components a failure left incomplete
// marked so; events after it are ignored.
func (b *barProgress) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	for _, r := range b.rows {
		if r.state != barVerified {
			r.state = barIncomplete
		}
	}
	b.finished = true
	b.draw()
}

// draw writes a frame: up to the first line of the previous frame, then
// every line, each cleared to its end in case it got shorter. A frame
// equal to the last one is not written.
func (b *barProgress) draw() {
	if len(b.rows) == 0 {
		// Nothing was fetched (already installed): nothing to show.
		return
	}
	var frame bytes.Buffer
	var sum int64
	state := barActive
	for _, r := range b.rows {
		frame.WriteString(b.line(r.name, r.bytes, r.total, r.state))
		sum += min(max(r.bytes, 0), r.total)
		if r.state == barIncomplete {
			state = barIncomplete
		}
	}
	frame.WriteString(b.line("total", sum, b.total, state))
	if bytes.Equal(frame.Bytes(), b.last) {
		return
	}
	b.last = frame.Bytes()
	var out bytes.Buffer
	if b.drawn > 0 {
		fmt.Fprintf(&out, "\x1b[%dA", b.drawn)
	}
	out.Write(frame.Bytes())
	b.drawn = len(b.rows) + 1
	b.drawnAt = b.now()
	// A write error (a closed terminal) is not worth failing the fetch for.
	b.w.Write(out.Bytes())
}

// line is one row of a frame: name, bar, bytes of total and the
// percentage or state, cut to the terminal's width.
func (b *barProgress) line(name string, n, total int64, state barState) string {
	n = min(max(n, 0), max(total, 0))
	pct := int64(100)
	if total > 0 {
		pct = n * 100 / total
	}
	filled := int(pct * barCells / 100)
	var s strings.Builder
	s.WriteString("\r")
	// Component names are [a-z0-9._-] (the manifest's rule), so a byte is
	// a column.
	if len(name) > barNameWidth {
		name = name[:barNameWidth-1] + "~"
	}
	fmt.Fprintf(&s, "%-*s [%s%s] %s / %s ", barNameWidth, name,
		strings.Repeat("=", filled), strings.Repeat(" ", barCells-filled), human(n), human(total))
	switch state {
	case barRetrying:
		s.WriteString("retrying")
	case barVerified:
		s.WriteString("verified")
	case barIncomplete:
		s.WriteString("incomplete")
	default:
		fmt.Fprintf(&s, "%3d%%", pct)
	}
	text := s.String()
	// Cut one column short of the width: some terminals wrap a line that
	// fills the last column.
	if b.width > 1 && len(text)-1 >= b.width {
		text = text[:b.width]
	}
	return text + "\x1b[K\n"
}
