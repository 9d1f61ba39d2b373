package report

import (
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/present/output"
)

// AppendJSON writes the report's JSON, exactly as encoding/json writes
// wireReport and Render indents and escapes it (output.JSONAppender), in
// one pass: `berth check --all -o json` spent more time in reflection over
// a thousand verdicts and in the passes over its 0.7 MB that indented and
// escaped it than in evaluating the checks. The fields are written in the
// order and with the omitempty rules of their struct tags;
// TestAppendJSONFields fails when a wire type gains a field this does not
// write, and TestAppendJSONEqualsEncodingJSON and FuzzAppendJSON compare
// the bytes with encoding/json's.
func (r *Report) AppendJSON(w *output.JSONWriter) error {
	x := r.index()
	// About what a verdict, an entry of a list and a finding take,
	// indented, so that the text is copied once.
	w.Grow(2048 + 330*len(r.Verdicts) + 12*len(x.lists) + 40*len(x.listEnd) + 500*len(x.findings))

	w.BeginObject()
	if err := appendHeader(w, &r.Header); err != nil {
		return err
	}
	w.Key("findings")
	w.BeginArray()
	for _, f := range x.findings {
		appendFinding(w, f)
	}
	w.EndArray()
	w.Key("findingLists")
	w.BeginArray()
	for k := range x.listEnd {
		w.BeginArray()
		for _, id := range x.list(k) {
			w.Int(int(id))
		}
		w.EndArray()
	}
	w.EndArray()
	w.Key("verdicts")
	w.BeginArray()
	for i := range r.Verdicts {
		appendVerdict(w, &r.Verdicts[i], int(x.listOf[i]))
	}
	w.EndArray()
	w.EndObject()
	return nil
}

func appendHeader(w *output.JSONWriter, h *Header) error {
	w.Key("kind")
	w.String(h.Kind)
	w.Key("schemaVersion")
	w.Int(h.SchemaVersion)
	w.Key("mode")
	w.String(h.Mode)

	w.Key("host")
	w.BeginObject()
	w.Key("root")
	w.String(h.Host.Root)
	w.Key("live")
	w.Bool(h.Host.Live)
	w.Key("collectedAt")
	// time.Time's own encoding; it fails for years outside 0-9999,
	// and Render then lets encoding/json report that.
	t, err := h.Host.CollectedAt.MarshalJSON()
	if err != nil {
		return err
	}
	w.Raw(t)
	optString(w, "distribution", h.Host.Distribution)
	optString(w, "cpu", h.Host.CPU)
	if h.Host.Guest != nil {
		w.Key("guest")
		w.Bool(*h.Host.Guest)
	}
	optString(w, "hypervisor", h.Host.Hypervisor)
	optString(w, "kernel", h.Host.Kernel)
	w.EndObject()

	w.Key("factsDigest")
	w.String(h.FactsDigest)

	w.Key("options")
	w.BeginObject()
	if len(h.Options.Platforms) > 0 {
		w.Key("platforms")
		w.BeginArray()
		for _, p := range h.Options.Platforms {
			w.String(p)
		}
		w.EndArray()
	}
	if h.Options.All {
		w.Key("all")
		w.Bool(true)
	}
	optString(w, "ignore", h.Options.Ignore)
	if h.Options.Strict {
		w.Key("strict")
		w.Bool(true)
	}
	w.Key("probe")
	w.Bool(h.Options.Probe)
	w.EndObject()

	w.Key("summary")
	w.BeginObject()
	w.Key("ready")
	w.Int(h.Summary.Ready)
	w.Key("readyWithWarnings")
	w.Int(h.Summary.ReadyWithWarnings)
	w.Key("notReady")
	w.Int(h.Summary.NotReady)
	w.EndObject()
	return nil
}

func appendFinding(w *output.JSONWriter, f *check.Finding) {
	w.BeginObject()
	// encoding/json leaves out the fields of a nil embedded pointer.
	if o := f.Outcome; o != nil {
		w.Key("id")
		w.String(o.ID)
		w.Key("title")
		w.String(o.Title)
		optString(w, "parent", o.Parent)
		w.Key("depth")
		w.Int(o.Depth)
		w.Key("raw")
		w.String(o.Raw.String())
		optString(w, "message", o.Message)
		if len(o.Evidence) > 0 {
			w.Key("evidence")
			w.BeginArray()
			for _, e := range o.Evidence {
				w.BeginObject()
				w.Key("field")
				w.String(e.Field)
				w.Key("value")
				w.String(e.Value)
				w.EndObject()
			}
			w.EndArray()
		}
		optString(w, "remedy", o.Remedy)
	}
	w.Key("status")
	w.String(f.Status.String())
	w.Key("severity")
	w.String(f.Severity.String())
	if f.Ignored {
		w.Key("ignored")
		w.Bool(true)
	}
	w.EndObject()
}

func appendVerdict(w *output.JSONWriter, v *check.Verdict, list int) {
	w.BeginObject()
	w.Key("platform")
	w.String(v.Platform)
	w.Key("name")
	w.String(v.Name)
	w.Key("verdict")
	w.String(string(v.Status))
	optString(w, "blockedBy", v.BlockedBy)
	optString(w, "remedy", v.Remedy)
	w.Key("failures")
	w.Int(v.Failures)
	w.Key("warnings")
	w.Int(v.Warnings)
	w.Key("unknowns")
	w.Int(v.Unknowns)
	w.Key("findings")
	w.Int(list)
	w.EndObject()
}

// optString writes a member tagged omitempty: nothing when s is empty.
func optString(w *output.JSONWriter, key, s string) {
	if s != "" {
		w.Key(key)
		w.String(s)
	}
}
