package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blob is deterministic test content with its item.
func blob(name string, size int) ([]byte, Item) {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	sum := sha256.Sum256(data)
	return data, Item{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(size), Names: []string{name}}
}

// request is what the server saw and served for one request.
type request struct {
	Path   string
	Range  string
	Served int64
}

// server is a loopback HTTP server whose n-th request is handled by
// behave(n); it records every request.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newServer(t *testing.T, behave func(n int, w http.ResponseWriter, r *http.Request) int64) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, request{Path: r.URL.Path, Range: r.Header.Get("Range")})
		s.mu.Unlock()
		served := behave(n, w, r)
		s.mu.Lock()
		s.reqs[n].Served = served
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

// serve answers r from data, honouring Range, and returns the bytes sent.
func serve(w http.ResponseWriter, r *http.Request, data []byte) int64 {
	cw := &countingWriter{ResponseWriter: w}
	http.ServeContent(cw, r, "f", time.Time{}, bytes.NewReader(data))
	return cw.n
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// newFetcher returns a fetcher with test timings and a cache in a temp dir.
func newFetcher(t *testing.T, locals ...Locator) *Fetcher {
	t.Helper()
	f := New(locals, filepath.Join(t.TempDir(), "cache"))
	f.Backoff, f.MaxBackoff, f.IdleTimeout = time.Millisecond, 5*time.Millisecond, 2*time.Second
	f.Jitter = func() float64 { return 0.5 }
	return f
}

func assertFile(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, not the expected %d", p, len(got), len(want))
	}
}

func assertNoPartials(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, _ os.DirEntry, _ error) error {
			if strings.HasSuffix(p, ".partial") {
				t.Errorf("temp file left: %s", p)
			}
			return nil
		})
	}
}

func TestHTTPFaults(t *testing.T) {
	const size = 300_000
	data, it := blob("qemu", size)
	other, _ := blob("other", size)
	other[size/2] ^= 0xff
	tests := []struct {
		name   string
		paths  []string // URL paths, in order
		behave func(n int, w http.ResponseWriter, r *http.Request) int64
		// check inspects the requests on success.
		check   func(t *testing.T, reqs []request)
		wantErr []string
	}{{
		name:  "truncated body resumes with Range",
		paths: []string{"/a"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if n == 0 {
				w.Header().Set("Content-Length", fmt.Sprint(size))
				w.WriteHeader(200)
				w.Write(data[:size/3])
				return size / 3
			}
			return serve(w, r, data)
		},
		check: func(t *testing.T, reqs []request) {
			if len(reqs) != 2 || reqs[1].Range != fmt.Sprintf("bytes=%d-", size/3) || reqs[1].Served != size-size/3 {
				t.Errorf("requests %+v: want a second one for bytes=%d- serving %d bytes", reqs, size/3, size-size/3)
			}
		},
	}, {
		name:  "connection reset mid-stream resumes, downloading only the rest",
		paths: []string{"/a"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if n == 0 {
				conn, buf, _ := w.(http.Hijacker).Hijack()
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
				buf.Write(data[:100_000])
				buf.Flush()
				conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
				conn.Close()
				return 100_000
			}
			return serve(w, r, data)
		},
		check: func(t *testing.T, reqs []request) {
			if len(reqs) != 2 || reqs[1].Range != "bytes=100000-" || reqs[1].Served != size-100_000 {
				t.Errorf("requests %+v: want a second one for bytes=100000- serving %d bytes", reqs, size-100_000)
			}
		},
	}, {
		name:  "500 then success",
		paths: []string{"/a"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if n < 2 {
				http.Error(w, "boom", 500)
				return 0
			}
			return serve(w, r, data)
		},
		check: func(t *testing.T, reqs []request) {
			if len(reqs) != 3 {
				t.Errorf("requests %+v: want 3", reqs)
			}
		},
	}, {
		name:  "404 on the first URL then a working mirror",
		paths: []string{"/gone", "/mirror"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if r.URL.Path == "/gone" {
				http.NotFound(w, r)
				return 0
			}
			return serve(w, r, data)
		},
		check: func(t *testing.T, reqs []request) {
			if len(reqs) != 2 || reqs[0].Path != "/gone" || reqs[1].Path != "/mirror" {
				t.Errorf("requests %+v: want /gone once (404 is not retried), then /mirror", reqs)
			}
		},
	}, {
		name:  "redirect",
		paths: []string{"/old"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusFound)
				return 0
			}
			return serve(w, r, data)
		},
	}, {
		name:  "slow server times out, then the mirror serves",
		paths: []string{"/slow", "/fast"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			if r.URL.Path == "/slow" {
				w.Header().Set("Content-Length", fmt.Sprint(size))
				w.Write(data[:1000])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
				return 1000
			}
			return serve(w, r, data)
		},
	}, {
		name:  "wrong digest is never placed",
		paths: []string{"/a"},
		behave: func(n int, w http.ResponseWriter, r *http.Request) int64 {
			return serve(w, r, other)
		},
		wantErr: []string{"component qemu", "expected sha256 " + it.SHA256, "has sha256 "},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.behave)
			f := newFetcher(t)
			if strings.HasPrefix(tc.name, "slow") {
				f.IdleTimeout, f.Attempts = 200*time.Millisecond, 1
			}
			item := it
			for _, p := range tc.paths {
				item.Sources = append(item.Sources, s.URL+p)
			}
			dst := filepath.Join(t.TempDir(), "qemu")
			res, err := f.Fetch(context.Background(), item, dst)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				var de *DigestError
				if !errors.As(err, &de) || de.Actual == it.SHA256 {
					t.Errorf("error %v is not a DigestError", err)
				}
				if _, serr := os.Stat(dst); serr == nil {
					t.Error("the bad file was placed")
				}
				if _, serr := os.Stat(f.CachePath(it.SHA256)); serr == nil {
					t.Error("the bad file was cached")
				}
				assertNoPartials(t, filepath.Dir(dst), f.Cache)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertFile(t, dst, data)
			assertFile(t, f.CachePath(it.SHA256), data)
			assertNoPartials(t, filepath.Dir(dst), f.Cache)
			if res.Fetched < size {
				t.Errorf("fetched %d bytes, want at least %d", res.Fetched, size)
			}
			if tc.check != nil {
				tc.check(t, s.requests())
			}
		})
	}
}

func TestSlowServerError(t *testing.T) {
	data, it := blob("kernel", 50_000)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) int64 {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data[:10])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return 10
	})
	f := newFetcher(t)
	f.IdleTimeout, f.Attempts = 100*time.Millisecond, 2
	it.Sources = []string{s.URL + "/k"}
	_, err := f.Fetch(context.Background(), it, filepath.Join(t.TempDir(), "k"))
	if err == nil || !strings.Contains(err.Error(), "no data for 100ms") || !strings.Contains(err.Error(), "2 attempts") {
		t.Fatalf("error %v: want a timeout after 2 attempts", err)
	}
}

func TestLocalSourcesAndCache(t *testing.T) {
	data, it := blob("kernel", 70_000)
	var hits int
	var mu sync.Mutex
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) int64 {
		mu.Lock()
		hits++
		mu.Unlock()
		return serve(w, r, data)
	})
	it.Sources = []string{s.URL + "/kernel"}

	t.Run("from dir by digest: no network", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, it.SHA256), data, 0o644)
		f := newFetcher(t, Dir(dir))
		dst := filepath.Join(t.TempDir(), "k")
		res, err := f.Fetch(context.Background(), it, dst)
		if err != nil || res.Fetched != 0 || res.Source != filepath.Join(dir, it.SHA256) {
			t.Fatalf("res %+v err %v", res, err)
		}
		assertFile(t, dst, data)
	})
	t.Run("from dir by name", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "kernel"), data, 0o644)
		f := newFetcher(t, Dir(dir))
		dst := filepath.Join(t.TempDir(), "k")
		if res, err := f.Fetch(context.Background(), it, dst); err != nil || res.Fetched != 0 {
			t.Fatalf("res %+v err %v", res, err)
		}
		assertFile(t, dst, data)
	})
	t.Run("corrupted file in --from falls back to the network", func(t *testing.T) {
		dir := t.TempDir()
		bad := bytes.Clone(data)
		bad[1234] ^= 0xff
		os.WriteFile(filepath.Join(dir, "kernel"), bad, 0o644)
		var events []Event
		var emu sync.Mutex
		f := newFetcher(t, Dir(dir))
		f.Progress = func(e Event) { emu.Lock(); events = append(events, e); emu.Unlock() }
		mu.Lock()
		before := hits
		mu.Unlock()
		dst := filepath.Join(t.TempDir(), "k")
		res, err := f.Fetch(context.Background(), it, dst)
		if err != nil || res.Source != it.Sources[0] || res.Fetched != it.Size {
			t.Fatalf("res %+v err %v", res, err)
		}
		assertFile(t, dst, data)
		mu.Lock()
		if hits != before+1 {
			t.Errorf("%d requests, want 1", hits-before)
		}
		mu.Unlock()
		var sawFallback bool
		for _, e := range events {
			sawFallback = sawFallback || (e.Phase == PhaseFallback && strings.Contains(e.Error, "expected sha256 "+it.SHA256))
		}
		if !sawFallback {
			t.Errorf("no fallback event naming the digest in %+v", events)
		}
	})
	t.Run("second fetch comes from the cache", func(t *testing.T) {
		f := newFetcher(t)
		if res, err := f.Fetch(context.Background(), it, filepath.Join(t.TempDir(), "k")); err != nil || res.Fetched != it.Size {
			t.Fatalf("first: res %+v err %v", res, err)
		}
		mu.Lock()
		before := hits
		mu.Unlock()
		res, err := f.Fetch(context.Background(), it, filepath.Join(t.TempDir(), "k"))
		if err != nil || res.Fetched != 0 || res.Source != f.CachePath(it.SHA256) {
			t.Fatalf("second: res %+v err %v", res, err)
		}
		mu.Lock()
		if hits != before {
			t.Errorf("second fetch made %d requests", hits-before)
		}
		mu.Unlock()
	})
	t.Run("file URL", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "src")
		os.WriteFile(p, data, 0o644)
		f := newFetcher(t)
		item := it
		item.Sources = []string{"file://" + p}
		dst := filepath.Join(t.TempDir(), "k")
		if res, err := f.Fetch(context.Background(), item, dst); err != nil || res.Source != p {
			t.Fatalf("res %+v err %v", res, err)
		}
		assertFile(t, dst, data)
	})
	t.Run("nothing anywhere", func(t *testing.T) {
		f := newFetcher(t)
		item := it
		item.Sources = nil
		_, err := f.Fetch(context.Background(), item, filepath.Join(t.TempDir(), "k"))
		if err == nil || !strings.Contains(err.Error(), "no source") {
			t.Fatalf("err %v", err)
		}
	})
}

// TestHalfTheRequestsFail fetches several items in parallel from a server
// that fails every other request in a different way.
func TestHalfTheRequestsFail(t *testing.T) {
	var items []Item
	content := map[string][]byte{}
	for i := range 6 {
		d, it := blob(fmt.Sprintf("c%d", i), 40_000+i*10_000)
		items = append(items, it)
		content["/"+it.Name] = d
	}
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) int64 {
		d := content[r.URL.Path]
		switch n % 4 {
		case 1:
			http.Error(w, "unavailable", 503)
			return 0
		case 3:
			w.Header().Set("Content-Length", fmt.Sprint(len(d)))
			w.Write(d[:len(d)/2])
			return int64(len(d) / 2)
		}
		return serve(w, r, d)
	})
	for i := range items {
		items[i].Sources = []string{s.URL + "/" + items[i].Name}
	}
	f := newFetcher(t)
	f.Attempts = 10
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	res, err := f.All(context.Background(), items, root, func(it Item) string { return it.Name }, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		assertFile(t, filepath.Join(dir, it.Name), content["/"+it.Name])
		if res[i].Item.Name != it.Name {
			t.Errorf("result %d is %s", i, res[i].Item.Name)
		}
	}
}

func TestBackoff(t *testing.T) {
	f := &Fetcher{Backoff: time.Second, MaxBackoff: 8 * time.Second, Jitter: func() float64 { return 1 }}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {9, 8 * time.Second}} {
		if got := f.backoff(tc.attempt); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.attempt, got, tc.want)
		}
	}
	f.Jitter = func() float64 { return 0 }
	if got := f.backoff(3); got != 2*time.Second {
		t.Errorf("backoff(3) with no jitter = %v, want half of 4s", got)
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("no space left on device")
	}
	return len(p), nil
}

func TestCopyHash(t *testing.T) {
	data, it := blob("x", 3*chunk+17)
	var out bytes.Buffer
	h := sha256.New()
	n, err := CopyHash(context.Background(), &out, bytes.NewReader(data), h)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) || hex.EncodeToString(h.Sum(nil)) != it.SHA256 {
		t.Fatalf("n %d err %v", n, err)
	}
	_, err = CopyHash(context.Background(), &failWriter{after: chunk}, bytes.NewReader(data), sha256.New())
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("write error not returned: %v", err)
	}
}

func TestBytes(t *testing.T) {
	doc := []byte("apiVersion: berth.dev/manifest/v1\n")
	sum := sha256.Sum256(doc)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) int64 {
		if n == 0 {
			http.Error(w, "later", 503)
			return 0
		}
		return serve(w, r, doc)
	})
	f := newFetcher(t)
	got, err := f.Bytes(context.Background(), s.URL+"/m.yaml", 1000, hex.EncodeToString(sum[:]))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("got %q err %v", got, err)
	}
	if _, err := f.Bytes(context.Background(), s.URL+"/m.yaml", 1000, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "pins") {
		t.Errorf("wrong pin: %v", err)
	}
	if _, err := f.Bytes(context.Background(), s.URL+"/m.yaml", 10, hex.EncodeToString(sum[:])); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("too large: %v", err)
	}
}

// TestCachePartialLocked: another process is downloading the same file
// into the shared cache; this one downloads beside it instead of appending
// to the same partial file.
func TestCachePartialLocked(t *testing.T) {
	data, it := blob("shim", 80_000)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) int64 { return serve(w, r, data) })
	it.Sources = []string{s.URL + "/shim"}
	f := newFetcher(t)
	cp := f.CachePath(it.SHA256)
	os.MkdirAll(filepath.Dir(cp), 0o755)
	other, err := os.OpenFile(cp+".partial", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Write(data[:1000])
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "shim")
	if _, err := f.Fetch(context.Background(), it, dst); err != nil {
		t.Fatal(err)
	}
	assertFile(t, dst, data)
	if fi, _ := os.Stat(cp + ".partial"); fi == nil || fi.Size() != 1000 {
		t.Errorf("the other process's partial file was touched: %v", fi)
	}
	if _, err := os.Stat(dst + ".partial"); err == nil {
		t.Error("partial file left beside dst")
	}
}
