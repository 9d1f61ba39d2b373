// Package fetch gets the files of a component manifest onto local disk,
// verified: from local directories and bundles first (looked up by digest,
// then by file name), then from berth's content-addressed cache, then from
// file:// and http(s) URLs in order. Downloads retry with exponential
// backoff and jitter, resume with Range requests after a broken connection,
// hash while they stream, and land in the cache so that nothing is
// downloaded twice. A file whose digest is wrong is never placed.
//
// Everything that varies (HTTP client, sleeping, jitter, directories) is a
// value in Fetcher, so tests run against a loopback server with short
// backoffs and never touch /var/cache.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/hostfs"
)

// Item is one file to fetch.
type Item struct {
	// Name names the component in messages and progress.
	Name string
	// SHA256 is the expected digest, lowercase hex.
	SHA256 string
	// Size is the expected size in bytes.
	Size int64
	// Sources are file:// or http(s) URLs, tried in order.
	Sources []string
	// Names are file names to look for in local directories and bundles
	// when no file is named by the digest.
	Names []string
}

// Phase is the kind of a progress Event.
type Phase string

// The phases of a fetch.
const (
	PhaseStart    Phase = "start"
	PhaseProgress Phase = "progress"
	PhaseRetry    Phase = "retry"
	PhaseFallback Phase = "fallback"
	PhaseDone     Phase = "done"
)

// Event reports progress of one item; Progress callbacks may be called from
// several goroutines at once.
type Event struct {
	Component string `json:"component"`
	Phase     Phase  `json:"phase"`
	Source    string `json:"source,omitempty"`
	Bytes     int64  `json:"bytes"`
	Total     int64  `json:"total"`
	Error     string `json:"error,omitempty"`
}

// Result says where an item came from.
type Result struct {
	Item Item
	// Source is the path or URL the verified bytes came from.
	Source string
	// Fetched counts the bytes transferred from URLs (network or file://);
	// a cache or --from hit fetches nothing.
	Fetched int64
}

// Fetcher fetches items. The zero value is not usable: Client and Sleep
// must be set (New gives defaults).
type Fetcher struct {
	// Client does the HTTP requests; its Transport decides proxies
	// (http.ProxyFromEnvironment in New).
	Client *http.Client
	// Locals are searched first, in order (--from directories and bundles).
	Locals []Locator
	// Cache is the cache directory ("" for none): verified downloads live
	// at <Cache>/sha256/<hex>, partial ones at <hex>.partial until
	// complete. Every access goes through an os.Root opened at it, so no
	// symlink in the cache leads a write out of it.
	Cache string
	// CacheIn, when set, is the host root the cache is in: the cache is
	// CacheRel inside it (resolved, without symlinks), created and opened
	// through it, so that it cannot leave the root; Cache then only names
	// it in messages. When nil, Cache is a directory on this machine.
	CacheIn  *hostfs.Writable
	CacheRel string
	// MaxItemSize refuses, before fetching anything, an item declaring
	// more bytes than this (0: no limit).
	MaxItemSize int64
	// Attempts is how often each URL is tried (at least 1).
	Attempts int
	// Backoff is the first retry delay; it doubles up to MaxBackoff, and
	// each delay is jittered to between half and all of it.
	Backoff, MaxBackoff time.Duration
	// IdleTimeout aborts a request that delivers no byte for this long.
	IdleTimeout time.Duration
	// Sleep waits d or until ctx is done (the clock).
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0,1).
	Jitter func() float64
	// Progress, if set, receives events.
	Progress func(Event)
	// Log receives debug and warning lines; nil discards them.
	Log *slog.Logger

	cacheMu   sync.Mutex
	cacheRoot *os.Root
}

// New returns a Fetcher with production defaults: proxies from the
// environment, 5 attempts per URL, backoff 1s..30s, 60s idle timeout.
func New(locals []Locator, cache string) *Fetcher {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tr.ResponseHeaderTimeout = 60 * time.Second
	return &Fetcher{
		Client:      &http.Client{Transport: tr},
		Locals:      locals,
		Cache:       cache,
		Attempts:    5,
		Backoff:     time.Second,
		MaxBackoff:  30 * time.Second,
		IdleTimeout: 60 * time.Second,
		Sleep:       SleepContext,
		Jitter:      rand.Float64,
	}
}

// SleepContext sleeps d or until ctx is done.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DigestError is a file whose content is not what the manifest says.
type DigestError struct {
	Component string
	Source    string
	Expected  string
	Actual    string
	Size      int64
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("component %s: %s has sha256 %s (%d bytes), expected sha256 %s", e.Component, e.Source, e.Actual, e.Size, e.Expected)
}

func (f *Fetcher) log() *slog.Logger {
	if f.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Log
}

func (f *Fetcher) emit(e Event) {
	if f.Progress != nil {
		f.Progress(e)
	}
}

// CachePath is where the cache holds a file of digest hex ("" without a
// cache), for messages.
func (f *Fetcher) CachePath(hex string) string {
	if f.Cache == "" {
		return ""
	}
	return filepath.Join(f.Cache, "sha256", hex)
}

// cacheName is the name of digest hex's file inside the cache root.
func cacheName(hex string) string { return "sha256/" + hex }

// OpenCache opens the cache directory as an os.Root (nil without a
// cache), creating it when create is set; a cache that does not exist and
// is not to be created is nil.
func (f *Fetcher) OpenCache(create bool) (*os.Root, error) {
	f.cacheMu.Lock()
	defer f.cacheMu.Unlock()
	if f.cacheRoot != nil || f.Cache == "" {
		return f.cacheRoot, nil
	}
	var r *os.Root
	var err error
	if f.CacheIn != nil {
		if create {
			if err := f.CacheIn.MkdirAll(f.CacheRel, 0o755); err != nil {
				return nil, fmt.Errorf("cache %s: %w", f.Cache, err)
			}
		}
		r, err = f.CacheIn.OpenRoot(f.CacheRel)
	} else {
		if create {
			if err := os.MkdirAll(f.Cache, 0o755); err != nil {
				return nil, fmt.Errorf("cache: %w", err)
			}
		}
		r, err = os.OpenRoot(f.Cache)
	}
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", f.Cache, err)
	}
	f.cacheRoot = r
	return r, nil
}

// Close releases the cache directory.
func (f *Fetcher) Close() error {
	f.cacheMu.Lock()
	defer f.cacheMu.Unlock()
	if f.cacheRoot == nil {
		return nil
	}
	err := f.cacheRoot.Close()
	f.cacheRoot = nil
	return err
}

// Cached reports whether the cache holds a file for digest hex (not
// verified: Fetch verifies what it copies).
func (f *Fetcher) Cached(hex string) bool {
	cr, err := f.OpenCache(false)
	if err != nil || cr == nil {
		return false
	}
	fi, err := cr.Lstat(cacheName(hex))
	return err == nil && fi.Mode().IsRegular()
}

// Local returns the name of the local source (a --from file, a bundle
// member or the cache) Fetch would try first for it, if any.
func (f *Fetcher) Local(it Item) (string, bool) {
	for _, l := range f.Locals {
		if cs := l.Lookup(it); len(cs) > 0 {
			return cs[0].Name, true
		}
	}
	if f.Cached(it.SHA256) {
		return f.CachePath(it.SHA256) + " (cache)", true
	}
	return "", false
}

// Fetch places the verified bytes of it at dst (created with mode 0600;
// the caller sets the final mode). The bytes are written to dst.partial
// and renamed, so dst is either absent or complete and correct. Every
// source that failed is named in the error. Writes stay in dst's
// directory (an os.Root is opened there).
func (f *Fetcher) Fetch(ctx context.Context, it Item, dst string) (Result, error) {
	dir, err := os.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return Result{Item: it}, fmt.Errorf("component %s: %w", it.Name, err)
	}
	defer dir.Close()
	return f.FetchIn(ctx, it, dir, filepath.Base(dst))
}

// FetchIn is Fetch into name (slash-separated, its directory existing)
// inside dir: every write goes through dir, so no symlink or ".." in name
// or in dir's tree reaches outside it.
func (f *Fetcher) FetchIn(ctx context.Context, it Item, dir *os.Root, name string) (Result, error) {
	res := Result{Item: it}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := CheckSize(it, f.MaxItemSize); err != nil {
		return res, err
	}
	dst := spot{dir, name}
	f.emit(Event{Component: it.Name, Phase: PhaseStart, Total: it.Size})
	var errs []error
	try := func(c Candidate) bool {
		err := f.copyVerified(ctx, it, c, dst)
		if err == nil {
			res.Source = c.Name
			f.emit(Event{Component: it.Name, Phase: PhaseDone, Source: c.Name, Bytes: it.Size, Total: it.Size})
			return true
		}
		f.log().Warn("local source unusable, trying the next", "component", it.Name, "source", c.Name, "err", err)
		f.emit(Event{Component: it.Name, Phase: PhaseFallback, Source: c.Name, Total: it.Size, Error: err.Error()})
		errs = append(errs, err)
		return false
	}
	for _, l := range f.Locals {
		for _, c := range l.Lookup(it) {
			if try(c) {
				return res, nil
			}
		}
	}
	if cr, err := f.OpenCache(false); err != nil {
		return res, fmt.Errorf("component %s: %w", it.Name, err)
	} else if cr != nil {
		cn := cacheName(it.SHA256)
		if fi, err := cr.Lstat(cn); err == nil && fi.Mode().IsRegular() {
			c := Candidate{Name: f.CachePath(it.SHA256), Open: func() (io.ReadCloser, error) { return cr.Open(cn) }}
			if try(c) {
				return res, nil
			}
			// A corrupt cache entry must not be found again.
			cr.Remove(cn)
		}
	}
	for _, src := range it.Sources {
		if p, ok := strings.CutPrefix(src, "file://"); ok {
			if try(fileCandidate(p)) {
				res.Fetched = it.Size
				return res, nil
			}
		}
	}
	for _, src := range it.Sources {
		low := strings.ToLower(src)
		if !strings.HasPrefix(low, "http://") && !strings.HasPrefix(low, "https://") {
			continue
		}
		n, err := f.download(ctx, it, src, dst)
		res.Fetched += n
		if err == nil {
			res.Source = src
			f.emit(Event{Component: it.Name, Phase: PhaseDone, Source: src, Bytes: it.Size, Total: it.Size})
			return res, nil
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("component %s: %w", it.Name, ctx.Err())
		}
		f.log().Warn("download failed, trying the next source", "component", it.Name, "url", src, "err", err)
		f.emit(Event{Component: it.Name, Phase: PhaseFallback, Source: src, Total: it.Size, Error: err.Error()})
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return res, fmt.Errorf("component %s (sha256 %s): no source: not in --from, not cached, and no usable URL", it.Name, it.SHA256)
	}
	return res, fmt.Errorf("component %s (sha256 %s): every source failed: %w", it.Name, it.SHA256, errors.Join(errs...))
}

// spot is a file name inside a directory opened as an os.Root.
type spot struct {
	dir  *os.Root
	name string
}

func (s spot) partial() spot { return spot{s.dir, s.name + ".partial"} }

// String is the spot's path on this machine, for messages.
func (s spot) String() string { return filepath.Join(s.dir.Name(), filepath.FromSlash(s.name)) }

// copyVerified copies candidate c to dst while hashing it, and renames it
// into place only if the digest and size match.
func (f *Fetcher) copyVerified(ctx context.Context, it Item, c Candidate, dst spot) error {
	src, err := c.Open()
	if err != nil {
		return fmt.Errorf("component %s: %w", it.Name, err)
	}
	defer src.Close()
	part := dst.partial()
	out, err := part.dir.OpenFile(part.name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("component %s: %w", it.Name, err)
	}
	h := sha256.New()
	n, err := CopyHash(ctx, out, io.LimitReader(src, it.Size+1), h)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		part.dir.Remove(part.name)
		return fmt.Errorf("component %s: copying %s to %s: %w", it.Name, c.Name, part, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != it.SHA256 || n != it.Size {
		part.dir.Remove(part.name)
		return &DigestError{Component: it.Name, Source: c.Name, Expected: it.SHA256, Actual: got, Size: n}
	}
	if err := dst.dir.Rename(part.name, dst.name); err != nil {
		part.dir.Remove(part.name)
		return fmt.Errorf("component %s: %w", it.Name, err)
	}
	return nil
}

// errBusy is a partial file another process is writing.
var errBusy = errors.New("partial file locked by another process")

// errPermanent marks a response that retrying the same URL cannot fix.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// download fetches url into the cache (or straight to dst.partial without
// a cache), resuming a partial file, and returns the bytes transferred.
func (f *Fetcher) download(ctx context.Context, it Item, rawURL string, dst spot) (int64, error) {
	part, final := dst.partial(), dst
	cr, err := f.OpenCache(true)
	if err != nil {
		return 0, fmt.Errorf("component %s: %w", it.Name, err)
	}
	if cr != nil {
		if err := cr.MkdirAll("sha256", 0o755); err != nil {
			return 0, fmt.Errorf("component %s: cache: %w", it.Name, err)
		}
		final = spot{cr, cacheName(it.SHA256)}
		part = final.partial()
	}
	d := &resumable{f: f, it: it, url: rawURL, part: part}
	defer d.close()
	if err := d.open(); errors.Is(err, errBusy) && final != dst {
		f.log().Info("another berth is downloading this file into the cache: downloading beside it", "component", it.Name)
		part, final = dst.partial(), dst
		d = &resumable{f: f, it: it, url: rawURL, part: part}
		defer d.close()
	}
	attempts := max(f.Attempts, 1)
	var last error
	for a := 0; a < attempts; a++ {
		if a > 0 {
			delay := f.backoff(a)
			f.emit(Event{Component: it.Name, Phase: PhaseRetry, Source: rawURL, Bytes: d.off, Total: it.Size, Error: last.Error()})
			f.log().Info("retrying", "component", it.Name, "url", rawURL, "attempt", a+1, "in", delay, "after", last)
			if err := f.Sleep(ctx, delay); err != nil {
				return d.fetched, err
			}
		}
		last = d.attempt(ctx)
		if last == nil {
			break
		}
		var de *DigestError
		var pe errPermanent
		if errors.As(last, &de) || errors.As(last, &pe) || ctx.Err() != nil {
			return d.fetched, last
		}
	}
	if last != nil {
		return d.fetched, fmt.Errorf("%s: %d attempts: %w", redact(rawURL), attempts, last)
	}
	// Renamed while the lock is held, so that nobody resumes a file that
	// is already complete.
	if err := final.dir.Rename(part.name, final.name); err != nil {
		return d.fetched, fmt.Errorf("component %s: %w", it.Name, err)
	}
	d.close()
	if final != dst {
		// Copy out of the cache; between two files on Linux io.Copy uses
		// copy_file_range, so the kernel copies (or reflinks) the data.
		if err := copyFile(final, dst); err != nil {
			return d.fetched, fmt.Errorf("component %s: %w", it.Name, err)
		}
	}
	return d.fetched, nil
}

func (f *Fetcher) backoff(attempt int) time.Duration {
	d := f.Backoff
	for i := 1; i < attempt && d < f.MaxBackoff; i++ {
		d *= 2
	}
	if f.MaxBackoff > 0 && d > f.MaxBackoff {
		d = f.MaxBackoff
	}
	j := 0.5
	if f.Jitter != nil {
		j = f.Jitter()
	}
	return d/2 + time.Duration(float64(d/2)*j)
}

// redact drops user info and query from a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// resumable is one download in progress: the partial file, how much of it
// is hashed, and the bytes transferred so far.
type resumable struct {
	f       *Fetcher
	it      Item
	url     string
	part    spot
	file    *os.File
	h       hash.Hash
	off     int64
	fetched int64
}

func (d *resumable) close() {
	if d.file != nil {
		d.file.Close()
		d.file = nil
	}
}

// open opens the partial file and brings the hash up to its end; a partial
// file left by an earlier process is re-hashed once.
func (d *resumable) open() error {
	if d.file != nil {
		return nil
	}
	fl, err := d.part.dir.OpenFile(d.part.name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("component %s: %w", d.it.Name, err)
	}
	// Two berth processes (two prefixes, one cache) must not append to
	// the same partial file.
	if err := unix.Flock(int(fl.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		fl.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return errBusy
		}
		return fmt.Errorf("component %s: locking %s: %w", d.it.Name, d.part, err)
	}
	d.file, d.h = fl, sha256.New()
	n, err := io.Copy(d.h, io.LimitReader(fl, d.it.Size))
	if err != nil {
		return fmt.Errorf("component %s: reading %s: %w", d.it.Name, d.part, err)
	}
	if err := fl.Truncate(n); err != nil {
		return fmt.Errorf("component %s: %w", d.it.Name, err)
	}
	d.off = n
	return nil
}

func (d *resumable) restart() error {
	if err := d.file.Truncate(0); err != nil {
		return err
	}
	_, err := d.file.Seek(0, io.SeekStart)
	d.h.Reset()
	d.off = 0
	return err
}

// attempt makes one request, appending to the partial file.
func (d *resumable) attempt(ctx context.Context) error {
	if err := d.open(); err != nil {
		return errPermanent{err}
	}
	if d.off == d.it.Size {
		return d.verify()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return errPermanent{fmt.Errorf("component %s: %w", d.it.Name, err)}
	}
	if d.off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.off))
	}
	var idle *time.Timer
	if d.f.IdleTimeout > 0 {
		idle = time.AfterFunc(d.f.IdleTimeout, func() {
			cancel(fmt.Errorf("no data for %s", d.f.IdleTimeout))
		})
		defer idle.Stop()
	}
	resp, err := d.f.Client.Do(req)
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", err, c)
		}
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && d.off > 0:
		var start int64 = -1
		fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-", &start)
		if start != d.off {
			if err := d.restart(); err != nil {
				return errPermanent{err}
			}
			return fmt.Errorf("server answered a range from %d, asked from %s: starting over", start, req.Header.Get("Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if d.off > 0 {
			// The server ignored Range: take the whole body again.
			if err := d.restart(); err != nil {
				return errPermanent{err}
			}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if err := d.restart(); err != nil {
			return errPermanent{err}
		}
		return fmt.Errorf("HTTP %s", resp.Status)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		return fmt.Errorf("HTTP %s", resp.Status)
	default:
		return errPermanent{fmt.Errorf("HTTP %s", resp.Status)}
	}
	if _, err := d.file.Seek(d.off, io.SeekStart); err != nil {
		return errPermanent{err}
	}
	body := &idleReader{r: resp.Body, t: idle, d: d.f.IdleTimeout}
	lim := io.LimitReader(body, d.it.Size-d.off+1)
	buf := make([]byte, 256<<10)
	for {
		n, rerr := lim.Read(buf)
		if n > 0 {
			if _, werr := d.file.Write(buf[:n]); werr != nil {
				return errPermanent{fmt.Errorf("component %s: writing %s: %w", d.it.Name, d.part, werr)}
			}
			d.h.Write(buf[:n])
			d.off += int64(n)
			d.fetched += int64(n)
			d.f.emit(Event{Component: d.it.Name, Phase: PhaseProgress, Source: d.url, Bytes: d.off, Total: d.it.Size})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
				return fmt.Errorf("after %d of %d bytes: %w (%w)", d.off, d.it.Size, rerr, c)
			}
			return fmt.Errorf("after %d of %d bytes: %w", d.off, d.it.Size, rerr)
		}
	}
	if d.off < d.it.Size {
		return fmt.Errorf("body ended after %d of %d bytes: %w", d.off, d.it.Size, io.ErrUnexpectedEOF)
	}
	return d.verify()
}

// verify checks the complete partial file; a wrong one is deleted.
func (d *resumable) verify() error {
	got := hex.EncodeToString(d.h.Sum(nil))
	if got == d.it.SHA256 && d.off == d.it.Size {
		if err := d.file.Sync(); err != nil {
			return errPermanent{err}
		}
		return nil
	}
	n := d.off
	d.close()
	d.part.dir.Remove(d.part.name)
	return &DigestError{Component: d.it.Name, Source: redact(d.url), Expected: d.it.SHA256, Actual: got, Size: n}
}

// idleReader pushes the idle deadline back on every byte received.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && r.t != nil {
		r.t.Reset(r.d)
	}
	return n, err
}

func copyFile(src, dst spot) error {
	in, err := src.dir.Open(src.name)
	if err != nil {
		return err
	}
	defer in.Close()
	part := dst.partial()
	out, err := part.dir.OpenFile(part.name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dst.dir.Rename(part.name, dst.name)
	}
	if err != nil {
		part.dir.Remove(part.name)
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}

// All fetches items into dir with at most parallel at once; name names
// each item's destination in dir (FetchIn). It refuses an item above
// MaxItemSize before fetching any, stops at the first error (cancelling
// the others) and returns the results in item order.
func (f *Fetcher) All(ctx context.Context, items []Item, dir *os.Root, name func(Item) string, parallel int) ([]Result, error) {
	for _, it := range items {
		if err := CheckSize(it, f.MaxItemSize); err != nil {
			return make([]Result, len(items)), err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]Result, len(items))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := f.FetchIn(ctx, it, dir, name(it))
			res[i] = r
			if err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return res, first
}

// Bytes downloads a small document (a pinned manifest) of at most limit
// bytes (limit) from rawURL, with the same retries as Fetch, and checks that its
// SHA-256 is sha (lowercase hex).
func (f *Fetcher) Bytes(ctx context.Context, rawURL string, limit int64, sha string) ([]byte, error) {
	var last error
	for a := 0; a < max(f.Attempts, 1); a++ {
		if a > 0 {
			if err := f.Sleep(ctx, f.backoff(a)); err != nil {
				return nil, err
			}
		}
		data, retry, err := f.getSmall(ctx, rawURL, limit)
		if err == nil {
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != sha {
				return nil, fmt.Errorf("%s has sha256 %s, but the reference pins %s", redact(rawURL), got, sha)
			}
			return data, nil
		}
		last = err
		if !retry {
			break
		}
	}
	return nil, fmt.Errorf("fetching %s: %w", redact(rawURL), last)
}

func (f *Fetcher) getSmall(ctx context.Context, rawURL string, limit int64) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, true, err
	}
	if int64(len(data)) > limit {
		return nil, false, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, false, nil
}
