package nodereport

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"berth.dev/berth/api/v1alpha1"
)

// MaxInstallAnnotationBytes is the largest InstallStatusAnnotation the
// agent reads (the node-installer's admission policy refuses larger ones
// too): a normalised record is at most about MaxInstallBytes, so anything
// much larger was not written by a node-installer.
const MaxInstallAnnotationBytes = 8 << 10

// installRecord is the annotation's JSON: the status with its schema
// version, so that a record of another version is refused, not misread.
type installRecord struct {
	Schema int `json:"schema"`
	v1alpha1.InstallStatus
}

// NormalizeInstall bounds s for the report: texts cut to the CRD's limits
// (with "…"), one entry per platform, failed before not-ready before
// installed, at most MaxInstallPlatforms entries and MaxInstallBytes of
// JSON, the rest counted in PlatformsOmitted. Failed entries are kept
// first because they are what an operator looks for.
func NormalizeInstall(s v1alpha1.InstallStatus) v1alpha1.InstallStatus {
	out := v1alpha1.InstallStatus{
		Version:          clip(s.Version, v1alpha1.MaxNameLen),
		Digest:           s.Digest,
		PlatformsOmitted: max(s.PlatformsOmitted, 0),
	}
	if len(out.Digest) > len("sha256:")+64 {
		out.Digest = "" // not a digest: better none than a cut one
	}
	if !s.Time.IsZero() {
		out.Time.Time = s.Time.UTC().Truncate(time.Second)
	}
	seen := map[string]bool{}
	for _, p := range s.Platforms {
		if p.Name == "" || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		out.Platforms = append(out.Platforms, v1alpha1.PlatformInstall{
			Name:    clip(p.Name, 63),
			Handler: clip(p.Handler, v1alpha1.MaxNameLen),
			State:   p.State,
			Error:   clip(p.Error, v1alpha1.MaxTextLen),
		})
	}
	slices.SortStableFunc(out.Platforms, func(a, b v1alpha1.PlatformInstall) int {
		return cmp.Compare(stateRank(a.State), stateRank(b.State))
	})
	if n := len(out.Platforms) - v1alpha1.MaxInstallPlatforms; n > 0 {
		out.Platforms = out.Platforms[:v1alpha1.MaxInstallPlatforms]
		out.PlatformsOmitted += int32(n)
	}
	for len(out.Platforms) > 0 && installSize(out) > v1alpha1.MaxInstallBytes {
		out.Platforms = out.Platforms[:len(out.Platforms)-1]
		out.PlatformsOmitted++
	}
	return out
}

func stateRank(s v1alpha1.InstallState) int {
	switch s {
	case v1alpha1.InstallFailed:
		return 0
	case v1alpha1.InstallNotReady:
		return 1
	}
	return 2
}

func installSize(s v1alpha1.InstallStatus) int {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("nodereport: sizing the install status: %v", err))
	}
	return len(b)
}

// WithInstall returns r with s (normalised) as its Install and its
// ContentHash recomputed; nil s removes Install. An unchanged install
// status gives an unchanged hash, so the agent writes nothing.
func WithInstall(r v1alpha1.Report, s *v1alpha1.InstallStatus) v1alpha1.Report {
	r.Install = nil
	if s != nil {
		n := NormalizeInstall(*s)
		r.Install = &n
	}
	r.ContentHash = Hash(r)
	return r
}

// EncodeInstall is the InstallStatusAnnotation value of s: s normalised,
// as compact JSON with its schema version.
func EncodeInstall(s v1alpha1.InstallStatus) (string, error) {
	b, err := json.Marshal(installRecord{Schema: v1alpha1.InstallStatusSchema, InstallStatus: NormalizeInstall(s)})
	if err != nil {
		return "", fmt.Errorf("encoding the install status: %w", err)
	}
	return string(b), nil
}

// DecodeInstall reads an InstallStatusAnnotation value. A value that is too
// large, not JSON, of another schema version or with an unknown state is an
// error saying so; the result is normalised.
func DecodeInstall(v string) (*v1alpha1.InstallStatus, error) {
	if len(v) > MaxInstallAnnotationBytes {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than the %d a node-installer writes", v1alpha1.InstallStatusAnnotation, len(v), MaxInstallAnnotationBytes)
	}
	var rec installRecord
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", v1alpha1.InstallStatusAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("annotation %s: data after the JSON object", v1alpha1.InstallStatusAnnotation)
	}
	if rec.Schema != v1alpha1.InstallStatusSchema {
		return nil, fmt.Errorf("annotation %s: schema %d, this agent reads schema %d", v1alpha1.InstallStatusAnnotation, rec.Schema, v1alpha1.InstallStatusSchema)
	}
	var errs []error
	for _, p := range rec.Platforms {
		switch p.State {
		case v1alpha1.InstallInstalled, v1alpha1.InstallNotReady, v1alpha1.InstallFailed:
		default:
			errs = append(errs, fmt.Errorf("platform %q: unknown state %q", clip(p.Name, 63), clip(string(p.State), 32)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", v1alpha1.InstallStatusAnnotation, err)
	}
	s := NormalizeInstall(rec.InstallStatus)
	return &s, nil
}
