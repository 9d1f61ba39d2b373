package snapshot

import (
	"bytes"
	"path"
	"strings"
)

// Redacted replaces every secret value in a snapshot.
const Redacted = "REDACTED"

// Redaction records which keys of a file were redacted.
type Redaction struct {
	Path string   `json:"path"`
	Keys []string `json:"keys"`
}

// secretKeys are the registry-credential keys of containerd
// (registry.configs."host".auth), CRI-O and containers-registries, and of
// kubeconfigs.
var secretKeys = map[string]bool{
	"password": true, "auth": true, "identitytoken": true, "token": true, "username": true,
	"client-key-data": true, "client_key_data": true, "registrytoken": true,
}

// Redact removes secrets from a captured file: private-key blocks
// anywhere; in TOML files (containerd, CRI-O, registries.conf) the values
// of secretKeys under a table or dotted key mentioning a registry or auth;
// in YAML kubeconfigs and JSON auth files the values of secretKeys. It
// returns the (possibly new) content and the redacted keys. Files under
// proc/ and sys/ are kernel data and returned as is.
func Redact(p string, data []byte) ([]byte, []string) {
	if strings.HasPrefix(p, "proc/") || strings.HasPrefix(p, "sys/") || strings.HasPrefix(p, "dev/") {
		return data, nil
	}
	if bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		return []byte(Redacted + ": private key\n"), []string{"private key"}
	}
	lines := strings.SplitAfter(string(data), "\n")
	var keys []string
	section := ""
	kind := fileKind(p)
	changed := false
	for i, l := range lines {
		trim := strings.TrimSpace(l)
		if trim == "" || trim[0] == '#' {
			continue
		}
		if kind == "toml" && trim[0] == '[' {
			section = strings.ToLower(trim)
			continue
		}
		sep := "="
		if kind != "toml" {
			sep = ":"
		}
		k, v, ok := strings.Cut(l, sep)
		if !ok {
			continue
		}
		key := strings.ToLower(strings.Trim(strings.TrimSpace(k), `"'- `))
		last := key
		if j := strings.LastIndexByte(key, '.'); j >= 0 && kind == "toml" {
			last = strings.Trim(key[j+1:], `"'`)
		}
		ctx := section + " " + key
		inScope := kind != "toml" || strings.Contains(ctx, "registr") || strings.Contains(ctx, "auth")
		if !inScope {
			continue
		}
		if kind == "toml" && strings.HasPrefix(strings.TrimSpace(v), "{") {
			nv, ks := redactInline(v)
			if len(ks) > 0 {
				lines[i] = k + sep + nv
				keys = append(keys, ks...)
				changed = true
			}
			continue
		}
		if !secretKeys[last] || strings.TrimSpace(v) == "" {
			continue
		}
		if kind == "json" && strings.HasPrefix(strings.TrimSpace(v), "{") {
			continue
		}
		lines[i] = k + sep + " " + quoteLike(v, kind) + trailing(l, v, kind)
		keys = append(keys, key)
		changed = true
	}
	if !changed {
		return data, nil
	}
	return []byte(strings.Join(lines, "")), keys
}

// fileKind guesses the syntax from the name.
func fileKind(p string) string {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, ".json"):
		return "json"
	case strings.HasSuffix(base, ".yaml"), strings.HasSuffix(base, ".yml"), strings.HasSuffix(base, ".kubeconfig"),
		strings.HasPrefix(p, "etc/kubernetes/") && strings.HasSuffix(base, ".conf"):
		return "yaml"
	}
	return "toml"
}

// quoteLike renders the redacted value in the file's syntax.
func quoteLike(v, kind string) string {
	if kind == "yaml" {
		return Redacted
	}
	return `"` + Redacted + `"`
}

// trailing keeps a JSON comma and the line end.
func trailing(line, v, kind string) string {
	end := ""
	if strings.HasSuffix(line, "\n") {
		end = "\n"
	}
	if kind == "json" && strings.HasSuffix(strings.TrimSpace(v), ",") {
		return "," + end
	}
	return end
}

// redactInline redacts secretKeys inside a TOML inline table.
func redactInline(v string) (string, []string) {
	var keys []string
	open := strings.IndexByte(v, '{')
	close := strings.LastIndexByte(v, '}')
	if close < open {
		close = len(v)
	}
	body := v[open+1 : close]
	parts := strings.Split(body, ",")
	for i, part := range parts {
		k, _, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		key := strings.ToLower(strings.Trim(strings.TrimSpace(k), `"'`))
		if secretKeys[key] {
			parts[i] = k + `= "` + Redacted + `"`
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return v, nil
	}
	return v[:open+1] + strings.Join(parts, ",") + " " + v[close:], keys
}
