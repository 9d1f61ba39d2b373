package discover

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"berth.dev/berth/bench/benchhost"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/internal/testkit/testhosts"
)

// plainFacts is facts.Facts without its generated MarshalJSON: encoding/json
// encodes it by reflection.
type plainFacts facts.Facts

// TestFactsJSONGenerated holds the generated encoder of Facts to
// encoding/json's reflection on what discovery really produces: every
// fixture host, the generated GPU node, and this machine.
func TestFactsJSONGenerated(t *testing.T) {
	same := func(t *testing.T, f *facts.Facts) {
		t.Helper()
		got, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal((*plainFacts)(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("generated encoder differs from reflection:\n got %s\nwant %s", got, want)
		}
		// berth facts -o json takes the generated text as it is.
		got, err = output.EncodeJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err = output.EncodeJSON((*plainFacts)(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("-o json differs from reflection's:\n got %s\nwant %s", got, want)
		}
	}
	for _, h := range testhosts.Names(t) {
		t.Run(h, func(t *testing.T) { same(t, discoverHost(t, h)) })
	}
	t.Run("generated-gpu-node", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := benchhost.Write(dir, benchhost.Base()); err != nil {
			t.Fatal(err)
		}
		root, err := hostfs.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		same(t, Run(context.Background(), root, Options{Now: fixedNow}))
	})
	t.Run("live", func(t *testing.T) {
		root, err := hostfs.NewLive("/")
		if err != nil {
			t.Fatal(err)
		}
		same(t, Run(context.Background(), root, Options{PCIIDs: "/usr/share/misc/pci.ids"}))
	})
}
