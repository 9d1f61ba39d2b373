package facts

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// plainFacts is Facts without its MarshalJSON: encoding/json encodes it by
// reflection, the reference the generated encoder is held to.
type plainFacts Facts

// reflectJSON is what encoding/json writes for f without the generated
// encoder.
func reflectJSON(f *Facts) ([]byte, error) { return json.Marshal((*plainFacts)(f)) }

// checkSameJSON fails t unless the generated encoder, and encoding/json
// through it, write what reflection writes for f, compact and indented
// (or all fail).
func checkSameJSON(t *testing.T, f *Facts) {
	t.Helper()
	want, werr := reflectJSON(f)
	got, gerr := f.MarshalCompactJSON()
	val, aerr := f.MarshalJSON()
	via, verr := json.Marshal(f)
	wantInd, wierr := json.MarshalIndent((*plainFacts)(f), "", "  ")
	ind, ierr := f.MarshalIndentJSON()
	if (werr != nil) != (gerr != nil) || (werr != nil) != (verr != nil) || (werr != nil) != (aerr != nil) ||
		(werr != nil) != (wierr != nil) || (werr != nil) != (ierr != nil) {
		t.Fatalf("errors differ: reflection %v, MarshalCompactJSON %v, MarshalJSON %v, json.Marshal %v, reflection indented %v, MarshalIndentJSON %v",
			werr, gerr, aerr, verr, wierr, ierr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(ind, wantInd) {
		t.Fatalf("MarshalIndentJSON differs from json.MarshalIndent by reflection:\n got %s\nwant %s", ind, wantInd)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalCompactJSON differs from reflection:\n got %s\nwant %s", got, want)
	}
	if !bytes.Equal(val, want) {
		t.Fatalf("MarshalJSON differs from reflection:\n got %s\nwant %s", val, want)
	}
	if !bytes.Equal(via, want) {
		t.Fatalf("json.Marshal differs from reflection:\n got %s\nwant %s", via, want)
	}
}

// TestMarshalJSONCases covers what the fuzz target reaches only by
// chance: the zero Facts, empty against nil collections, omitzero's
// structs, escapes, and a time encoding/json refuses.
func TestMarshalJSONCases(t *testing.T) {
	one, zero := 1, 0
	yes := true
	for _, tc := range []struct {
		name string
		f    Facts
	}{
		{"zero", Facts{}},
		{"empty slices and maps", Facts{PCI: []PCIDevice{}, Unknown: []Missing{}, Kernel: Kernel{Modules: map[string]Module{}}}},
		{"nil and empty members", Facts{PCI: []PCIDevice{{Address: "0000:00:00.0", IOMMUGroup: &zero, VGPUTypes: []string{}}, {IOMMUGroup: &one}}}},
		{"omitzero kept", Facts{Plugins: Plugins{Errors: []PluginError{}}}},
		{"escapes", Facts{Root: "<a href=\"x\">&\\</a>\n\t\x00\x7f\u2028\u2029\xff\xfeé", OS: OS{ID: "\x1b[31m"}}},
		{"map keys sorted and escaped", Facts{Kernel: Kernel{Modules: map[string]Module{"b<": {Loaded: true}, "a": {Params: map[string]string{"z": "1", "y&": "2"}}}}}},
		{"pointers", Facts{Virt: Virt{Guest: &yes}}},
		{"time with zone", Facts{CollectedAt: time.Date(2026, 12, 2, 1, 2, 3, 456, time.FixedZone("x", 3600))}},
		{"time out of range", Facts{CollectedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSameJSON(t, &tc.f) })
	}
}

// FuzzMarshalJSON fills a Facts from the fuzzer's bytes (every field
// reachable: strings with the characters encoding/json escapes, nil,
// empty and full slices and maps, nil and set pointers, times in and out
// of range) and holds the generated encoder to reflection.
func FuzzMarshalJSON(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{0xff, 0x01, 0x80, 0x7f}, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fx Facts
		fill(&filler{data: data}, reflect.ValueOf(&fx).Elem(), 0)
		checkSameJSON(t, &fx)
	})
}

// filler turns bytes into values; past the end it reads zeros.
type filler struct {
	data []byte
	i    int
}

func (f *filler) next() byte {
	if f.i >= len(f.data) {
		return 0
	}
	b := f.data[f.i]
	f.i++
	return b
}

func (f *filler) int64() int64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(f.next())
	}
	return int64(v)
}

// fragments are what strings are made of: plain text and every kind of
// character encoding/json treats apart.
var fragments = []string{"a", "kvm", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xc3", "\U0001F600", "\ufffd", "/"}

func (f *filler) string() string {
	var b strings.Builder
	for range int(f.next() % 6) {
		b.WriteString(fragments[int(f.next())%len(fragments)])
	}
	return b.String()
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets v from the bytes; depth bounds the nesting of collections.
func fill(f *filler, v reflect.Value, depth int) {
	if v.Type() == timeType {
		var t time.Time
		switch f.next() % 4 {
		case 1:
			t = time.Unix(f.int64()%(1<<40), int64(f.next())).UTC()
		case 2:
			t = time.Unix(f.int64()%(1<<40), 0).In(time.FixedZone("z", int(int8(f.next()))*900))
		case 3:
			t = time.Date(10000+int(f.next()), 1, 1, 0, 0, 0, 0, time.UTC)
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.string())
	case reflect.Bool:
		v.SetBool(f.next()&1 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.int64())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.int64()))
	case reflect.Pointer:
		if f.next()%3 == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(f, p.Elem(), depth)
		v.Set(p)
	case reflect.Slice:
		n := collectionSize(f, depth)
		if n < 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(f, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		n := collectionSize(f, depth)
		if n < 0 {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			fill(f, k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(f, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(f, v.Field(i), depth)
			}
		}
	default:
		panic("fill: unexpected kind " + v.Kind().String())
	}
}

// collectionSize is -1 (nil), 0 (empty) or a few elements, fewer deeper.
func collectionSize(f *filler, depth int) int {
	b := f.next()
	switch {
	case b%4 == 0:
		return -1
	case b%4 == 1 || depth > 2:
		return 0
	}
	return int(b>>2) % 3
}
