// Command ociimage builds and checks the berth agent's OCI image without a
// container engine: one layer holding the static binary at /berth on an
// empty base, written as an image tarball that `docker load`, `ctr images
// import`, `kind load image-archive` and `crane push` accept.
//
//	ociimage build -binary bin/berth-cluster-linux-amd64 -o bin/berth-agent-oci.tar -tag ghcr.io/berth-dev/berth-agent:v0.3.0 -version v0.3.0
//	ociimage verify bin/berth-agent-oci.tar
//
// The build is reproducible: file times and the creation time come from
// SOURCE_DATE_EPOCH (default 0), so the same binary gives the same digest.
// It lives in a module of its own so that go-containerregistry never
// becomes a dependency of berth itself.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BinaryPath is where the binary sits in the image; it is the entrypoint.
const BinaryPath = "/berth"

// Label keys the image carries (OCI annotations spec, pre-defined keys).
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelLicenses = "org.opencontainers.image.licenses"
	LabelCreated  = "org.opencontainers.image.created"
)

// Options describe the image to build.
type Options struct {
	Binary  string    // path of the static linux binary
	Tag     string    // image reference recorded in the tarball
	Version string    // berth version, for the version label
	Source  string    // source repository URL
	Arch    string    // GOARCH of the binary
	Created time.Time // image creation time (reproducible builds: fixed)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: ociimage build|verify ...")
	}
	switch args[0] {
	case "build":
		fs := flag.NewFlagSet("build", flag.ContinueOnError)
		var o Options
		out := fs.String("o", "bin/berth-agent-oci.tar", "output tarball")
		fs.StringVar(&o.Binary, "binary", "", "static linux binary to package (required)")
		fs.StringVar(&o.Tag, "tag", "ghcr.io/berth-dev/berth-agent:latest", "image reference")
		fs.StringVar(&o.Version, "version", "dev", "berth version for the version label")
		fs.StringVar(&o.Source, "source", "https://github.com/berth-dev/berth", "source repository URL")
		fs.StringVar(&o.Arch, "arch", "amd64", "architecture of the binary")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if o.Binary == "" {
			return errors.New("build: -binary is required")
		}
		created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
		if err != nil {
			return err
		}
		o.Created = created
		img, ref, err := Build(o)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(*out, ref, img); err != nil {
			return fmt.Errorf("writing %s: %w", *out, err)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s %s\n", *out, ref, d)
		return nil
	case "verify":
		if len(args) != 2 {
			return errors.New("usage: ociimage verify <tarball>")
		}
		info, err := Verify(args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: ok: %s %s, %d-byte %s, version %s\n", args[1], info.Digest, info.Platform, info.BinarySize, BinaryPath, info.Version)
		return nil
	}
	return fmt.Errorf("unknown command %q: want build or verify", args[0])
}

// sourceDateEpoch parses SOURCE_DATE_EPOCH (seconds); empty is the epoch.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected seconds since 1970: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Build returns the image and the reference to record for it.
func Build(o Options) (v1.Image, name.Reference, error) {
	ref, err := name.ParseReference(o.Tag)
	if err != nil {
		return nil, nil, fmt.Errorf("-tag %q: %w", o.Tag, err)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, nil, fmt.Errorf("%s is not an ELF binary", o.Binary)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	hdr := &tar.Header{
		Name: BinaryPath[1:], Mode: 0o755, Size: int64(len(bin)),
		Typeflag: tar.TypeReg, ModTime: o.Created, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	raw := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("building the layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = []string{"agent"}
	cf.Config.User = "0:0"
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		LabelTitle:    "berth-agent",
		LabelVersion:  o.Version,
		LabelSource:   o.Source,
		LabelLicenses: "Apache-2.0",
		LabelCreated:  o.Created.Format(time.RFC3339),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, err
	}
	return img, ref, nil
}

// Info is what Verify found in a tarball.
type Info struct {
	Digest     v1.Hash
	Platform   string
	BinarySize int64
	Version    string
}

// Verify checks a tarball written by build: one image, linux, entrypoint
// /berth, the labels, and a single layer whose only file is an executable
// static ELF binary at /berth.
func Verify(path string) (Info, error) {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return Info{}, fmt.Errorf("reading %s: %w", path, err)
	}
	var info Info
	if info.Digest, err = img.Digest(); err != nil {
		return info, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return info, fmt.Errorf("%s: config: %w", path, err)
	}
	info.Platform = cf.OS + "/" + cf.Architecture
	if cf.OS != "linux" {
		return info, fmt.Errorf("%s: os %q, want linux", path, cf.OS)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath {
		return info, fmt.Errorf("%s: entrypoint %q, want [%s]", path, cf.Config.Entrypoint, BinaryPath)
	}
	for _, k := range []string{LabelTitle, LabelVersion, LabelSource} {
		if cf.Config.Labels[k] == "" {
			return info, fmt.Errorf("%s: label %s missing", path, k)
		}
	}
	info.Version = cf.Config.Labels[LabelVersion]
	layers, err := img.Layers()
	if err != nil {
		return info, err
	}
	if len(layers) != 1 {
		return info, fmt.Errorf("%s: %d layers, want 1", path, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return info, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return info, fmt.Errorf("%s: reading the layer: %w", path, err)
		}
		if "/"+h.Name != BinaryPath {
			return info, fmt.Errorf("%s: unexpected file %s in the layer", path, h.Name)
		}
		if h.Mode&0o111 == 0 {
			return info, fmt.Errorf("%s: %s is not executable (mode %o)", path, BinaryPath, h.Mode)
		}
		head := make([]byte, 4)
		if _, err := io.ReadFull(tr, head); err != nil || !bytes.Equal(head, []byte("\x7fELF")) {
			return info, fmt.Errorf("%s: %s is not an ELF binary", path, BinaryPath)
		}
		info.BinarySize = h.Size
	}
	if info.BinarySize == 0 {
		return info, fmt.Errorf("%s: no %s in the layer", path, BinaryPath)
	}
	return info, nil
}
