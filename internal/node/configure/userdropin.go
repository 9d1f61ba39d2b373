package configure

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/decodeerr"
	"berth.dev/berth/platform"
)

// ContainerdUserDropInName is the file of the operator's containerd drop-in in the
// drop-in directory berth's handlers use: it sorts after berth's own
// (berth-kata-...), so that containerd, which merges its imports in name
// order, lets its keys win, as kata-deploy loads containerd.userDropIn
// after its generated drop-in.
const ContainerdUserDropInName = "berth-user.toml"

// MaxUserDropIn bounds the operator's drop-in: a containerd drop-in is a
// few tables.
const MaxUserDropIn = 64 << 10

// userDropInHeader opens the written file, so that whoever finds it on
// the node knows where it came from and that it is rewritten.
const userDropInHeader = "# The operator's containerd drop-in, written by berth (kata-deploy's containerd.userDropIn).\n" +
	"# Do not edit: the node-installer rewrites it from nodeInstaller.containerdUserDropIn and removes\n" +
	"# it with the last platform.\n"

// CheckUserDropIn refuses an operator's containerd drop-in that is not
// TOML, naming the line, or that is too large.
func CheckUserDropIn(name string, data []byte) error {
	if len(data) > MaxUserDropIn {
		return fmt.Errorf("%s: %d bytes, more than %d: not a containerd drop-in", name, len(data), MaxUserDropIn)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: empty: give TOML tables for containerd, or no drop-in", name)
	}
	var v map[string]any
	if err := toml.Unmarshal(data, &v); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			return fmt.Errorf("%s: line %d: not TOML: %s", name, row, decodeerr.Error(err))
		}
		return fmt.Errorf("%s: not TOML: %s", name, decodeerr.Error(err))
	}
	return nil
}

// userDropInFile is the operator's drop-in as one more file of a
// platform: owned by every containerd platform that carries it (so that
// it goes with the last of them), in the directory of the handler's own
// drop-in, which containerd's imports already load. Layouts where
// containerd reads no drop-in of berth's (k3s' template, containerd 1.x
// configs of version 2, CRI-O) refuse it: there it would have to be
// merged into the main config, which is the operator's.
func userDropInFile(t Target, rt []File, data []byte) (File, error) {
	if t.Layout.Runtime != platform.Containerd {
		return File{}, errors.New("a containerd drop-in was given, but the platform's runtime is CRI-O")
	}
	if err := CheckUserDropIn("the containerd drop-in", data); err != nil {
		return File{}, err
	}
	i := slices.IndexFunc(rt, func(f File) bool { return f.Kind == Owned && path.Ext(f.Path) == ".toml" })
	if i < 0 {
		return File{}, fmt.Errorf("layout %q with containerd config version %d loads no drop-in of berth's (the handler goes into the main config): a containerd drop-in needs containerd 2.x, or a distribution whose containerd reads a drop-in directory", t.LayoutName, t.ConfigVersion)
	}
	content := append([]byte(userDropInHeader), data...)
	if !bytes.HasSuffix(content, []byte("\n")) {
		content = append(content, '\n')
	}
	return File{Path: path.Join(path.Dir(rt[i].Path), ContainerdUserDropInName), Kind: Owned, Format: "toml", Content: content,
		Purpose: "the operator's containerd drop-in"}, nil
}
