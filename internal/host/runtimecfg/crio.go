package runtimecfg

import (
	"maps"
	"slices"

	"berth.dev/berth/internal/host/facts"
)

// CRIO is what berth reads from one CRI-O config file (crio.conf or a
// crio.conf.d drop-in).
type CRIO struct {
	// File names the file in errors and in Handler.Source.
	File string `json:"file"`
	// DefaultRuntime is crio.runtime.default_runtime.
	DefaultRuntime string `json:"defaultRuntime,omitempty"`
	// StorageDriver is crio.storage_driver (overlay, ...).
	StorageDriver string `json:"storageDriver,omitempty"`
	// Handlers are the [crio.runtime.runtimes.<name>] tables, sorted.
	Handlers []Handler `json:"handlers,omitempty"`
}

type crioRuntimeTOML struct {
	RuntimePath                  *string   `toml:"runtime_path"`
	RuntimeType                  *string   `toml:"runtime_type"`
	RuntimeRoot                  *string   `toml:"runtime_root"`
	RuntimeConfigPath            *string   `toml:"runtime_config_path"`
	PrivilegedWithoutHostDevices *bool     `toml:"privileged_without_host_devices"`
	AllowedAnnotations           *[]string `toml:"allowed_annotations"`
}

type crioTOML struct {
	Crio struct {
		StorageDriver *string `toml:"storage_driver"`
		Runtime       struct {
			DefaultRuntime *string                    `toml:"default_runtime"`
			Runtimes       map[string]crioRuntimeTOML `toml:"runtimes"`
		} `toml:"runtime"`
	} `toml:"crio"`
}

// ParseCRIO reads one CRI-O config file. file only names the file in
// errors and in each handler's Source. Errors are *ParseError.
func ParseCRIO(file string, data []byte) (*CRIO, error) {
	var doc crioTOML
	if err := decode(file, data, &doc); err != nil {
		return nil, err
	}
	c := &CRIO{File: file}
	if p := doc.Crio.Runtime.DefaultRuntime; p != nil {
		c.DefaultRuntime = *p
	}
	if p := doc.Crio.StorageDriver; p != nil {
		c.StorageDriver = *p
	}
	runtimes := doc.Crio.Runtime.Runtimes
	for _, name := range slices.Sorted(maps.Keys(runtimes)) {
		r := runtimes[name]
		h := Handler{Handler: facts.Handler{Name: name, Source: file}}
		setKey(&h, "runtime_path", r.RuntimePath, &h.RuntimePath)
		setKey(&h, "runtime_type", r.RuntimeType, &h.RuntimeType)
		setKey(&h, "runtime_root", r.RuntimeRoot, &h.RuntimeRoot)
		setKey(&h, "runtime_config_path", r.RuntimeConfigPath, &h.ConfigPath)
		setKey(&h, "privileged_without_host_devices", r.PrivilegedWithoutHostDevices, &h.PrivilegedWithoutHostDevices)
		setKey(&h, "allowed_annotations", r.AllowedAnnotations, &h.PodAnnotations)
		slices.Sort(h.Keys)
		c.Handlers = append(c.Handlers, h)
	}
	return c, nil
}

// Merge applies a drop-in over c with CRI-O's semantics: files are read in
// lexical order and a later file's keys override earlier ones.
func (c *CRIO) Merge(over *CRIO) *CRIO {
	out := *c
	out.Handlers = mergeHandlers(c.Handlers, over.Handlers)
	if over.DefaultRuntime != "" {
		out.DefaultRuntime = over.DefaultRuntime
	}
	if over.StorageDriver != "" {
		out.StorageDriver = over.StorageDriver
	}
	return &out
}
