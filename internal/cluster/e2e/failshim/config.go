package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// root is set with -ldflags "-X main.root=DIR": the host root the Kata
// configuration named by the runtime options is read under (a test's
// --root), "" for none. With it, each invocation also records what
// containerd handed the shim.
var root string

// Given is what containerd handed the shim: the ConfigPath of the
// handler's runtime options (on the start command's standard input, as
// containerd passes them to every shim v2) and the Kata configuration it
// names merged with its config.d drop-ins the way Kata's runtime merges
// them (katautils decodeDropIns: config.d beside the file the path
// resolves to, every file in name order, each key over the last).
type Given struct {
	ConfigPath string         `json:"configPath"`
	Config     map[string]any `json:"config,omitempty"`
	DropIns    []string       `json:"dropIns,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// GivenPrefix starts the marker line that records a Given as JSON.
const GivenPrefix = "given "

// given reads the runtime options from r and the configuration they name.
func given(r io.Reader) Given {
	data, err := io.ReadAll(r)
	if err != nil {
		return Given{Error: "reading stdin: " + err.Error()}
	}
	value, err := runtimeOptions(data)
	if err != nil {
		return Given{Error: fmt.Sprintf("runtime options (%d bytes on stdin): %v", len(data), err)}
	}
	// runtimeoptions.v1.Options{type_url = 1; config_path = 2; config_body = 3}
	cp, err := protoFields(value, 2)
	if err != nil || len(cp) == 0 {
		return Given{Error: fmt.Sprintf("runtime options %q: no config_path (%v)", value, err)}
	}
	g := Given{ConfigPath: string(cp[0])}
	if err := g.load(); err != nil {
		g.Error = err.Error()
	}
	return g
}

func (g *Given) load() error {
	main, err := filepath.EvalSymlinks(filepath.Join(root, g.ConfigPath))
	if err != nil {
		return err
	}
	if g.Config, err = decode(main); err != nil {
		return err
	}
	dir := filepath.Join(filepath.Dir(main), "config.d")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		m, err := decode(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		merge(g.Config, m)
		g.DropIns = append(g.DropIns, e.Name())
	}
	return nil
}

func decode(file string) (map[string]any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := toml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}

// merge sets every key of over in into, table by table.
func merge(into, over map[string]any) {
	for k, v := range over {
		sub, ok := v.(map[string]any)
		have, isTable := into[k].(map[string]any)
		if ok && isTable {
			merge(have, sub)
			continue
		}
		into[k] = v
	}
}

// runtimeOptionsType is the type URL of the options of a handler that is
// not runc's (containerd's runtimeoptions.v1.Options), Kata's.
const runtimeOptionsType = "runtimeoptions.v1.Options"

// runtimeOptions finds the handler's runtime options on the start
// command's standard input: containerd 2.x (the bootstrap protocol) sends
// BootstrapParams{extensions = 8: Extension{value = 1: Any}}, earlier
// releases the google.protobuf.Any{type_url = 1; value = 2} itself.
func runtimeOptions(data []byte) ([]byte, error) {
	if exts, err := protoFields(data, 8); err == nil {
		for _, e := range exts {
			anys, err := protoFields(e, 1)
			if err != nil || len(anys) == 0 {
				continue
			}
			if v, ok := anyOf(anys[0], runtimeOptionsType); ok {
				return v, nil
			}
		}
	}
	if v, ok := anyOf(data, runtimeOptionsType); ok {
		return v, nil
	}
	return nil, errors.New("no " + runtimeOptionsType + " (neither a bootstrap extension nor an Any)")
}

// anyOf returns the value of the google.protobuf.Any b when its type URL
// ends in typ.
func anyOf(b []byte, typ string) ([]byte, bool) {
	t, err := protoFields(b, 1)
	if err != nil || len(t) == 0 || !strings.HasSuffix(string(t[0]), typ) {
		return nil, false
	}
	v, err := protoFields(b, 2)
	if err != nil || len(v) == 0 {
		return nil, false
	}
	return v[0], true
}

// protoFields returns every length-delimited field n of a protobuf
// message.
func protoFields(b []byte, n uint64) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad varint")
		}
		b = b[k:]
		switch key & 7 {
		case 0:
			_, k = binary.Uvarint(b)
			if k <= 0 {
				return nil, errors.New("bad varint")
			}
			b = b[k:]
		case 1, 5:
			size := 8
			if key&7 == 5 {
				size = 4
			}
			if len(b) < size {
				return nil, errors.New("truncated field")
			}
			b = b[size:]
		case 2:
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return nil, errors.New("truncated field")
			}
			if key>>3 == n {
				out = append(out, b[k:k+int(l)])
			}
			b = b[k+int(l):]
		default:
			return nil, fmt.Errorf("wire type %d", key&7)
		}
	}
	return out, nil
}

// record appends g to the marker as one line.
func record(f io.Writer, g Given) {
	b, _ := json.Marshal(g)
	fmt.Fprintf(f, "%s%s\n", GivenPrefix, b)
}
