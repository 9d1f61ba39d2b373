package fleet

import (
	"fmt"
	"html/template"
	"io"
	"time"
)

// htmlPage is one self-contained page: inline CSS and JS, no fonts, images
// or requests of any kind (the favicon is an empty data URL so that the
// browser does not ask for one), so it can be mailed or archived.
var htmlPage = template.Must(template.New("fleet").Funcs(template.FuncMap{
	"gid":   GroupID,
	"cell":  cell,
	"class": cellClass,
	"list":  NodeList,
	"shown": shown,
	"pct": func(n, of int) string {
		if of == 0 {
			return "0%"
		}
		return fmt.Sprintf("%d%%", n*100/of)
	},
	"tip": func(a *Analysis, g Group, j int) string {
		s := fmt.Sprintf("%s on %s (%d nodes)", cell(g.Verdicts[j]), a.Platforms[j], len(g.Nodes))
		if b := g.BlockedBy[j]; b != "" && g.Verdicts[j] == NotReady {
			s += ": blocked by " + b
		}
		return s
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>berth fleet: {{.A.Nodes}} nodes</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1d2733;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .5em}h3{font-size:1em;margin:1em 0 .4em}
.meta{color:#5b6b7b;font-size:.9em}
table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #d5dce3;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f2f5f8;position:sticky;top:0}
td.c{text-align:center;min-width:3.2em;font-weight:600}
.ready{background:#2e9d5b;color:#fff}.warn{background:#f1c232;color:#222}.no{background:#d9534f;color:#fff}.absent{background:#eef1f4;color:#8a97a5}
tr.hidden{display:none}
th.g{cursor:pointer}th.g:hover,th.g.sel{background:#dfe8f1}
#members{margin:.6em 0;padding:.5em .8em;background:#f7f9fb;border:1px solid #d5dce3;min-height:1.4em;font-size:.9em}
.legend span{display:inline-block;padding:.1em .6em;margin-right:.4em;border-radius:3px;font-size:.85em}
ul{padding-left:1.2em}li{margin:.15em 0}
code{background:#f2f5f8;padding:0 .25em;border-radius:3px}
input{font:inherit;padding:.2em .4em;margin:.4em 0}
</style>
</head>
<body>
<h1>berth fleet</h1>
<div class="meta">{{.A.Nodes}} nodes in {{len .A.Groups}} groups, {{len .A.Platforms}} platforms{{if .A.Malformed}}, {{len .A.Malformed}} malformed reports{{end}} &middot; generated {{.Generated}}</div>

<h2>Platforms by node group</h2>
<div class="legend"><span class="ready">ready</span><span class="warn">warn: ready with warnings</span><span class="no">NO: not ready</span><span class="absent">-: not evaluated</span></div>
<input id="filter" type="search" placeholder="filter platforms" aria-label="filter platforms">
<div id="members">Click a group to list its nodes.</div>
<table id="matrix">
<thead><tr><th>platform</th><th>usable</th>{{range $i, $g := .A.Groups}}<th class="g" data-g="{{$i}}" title="{{$g.Class}}">{{gid $i}}<br><small>{{len $g.Nodes}}</small></th>{{end}}</tr></thead>
<tbody>
{{range $j, $p := .A.Platforms}}{{$s := index $.A.Summary $j}}<tr data-p="{{$p}}"><td><code>{{$p}}</code></td><td>{{$s.Usable}} ({{pct $s.Usable $.A.Nodes}})</td>{{range $g := $.A.Groups}}{{$v := index $g.Verdicts $j}}<td class="c {{class $v}}" title="{{tip $.A $g $j}}">{{cell $v}}</td>{{end}}</tr>
{{end}}</tbody>
</table>

<h2>Groups</h2>
<table>
<thead><tr><th>group</th><th>nodes</th><th>hardware class</th><th>members</th></tr></thead>
<tbody>
{{range $i, $g := .A.Groups}}<tr><td>{{gid $i}}</td><td>{{len $g.Nodes}}</td><td>{{$g.Class}}</td><td>{{list $g.Nodes}}</td></tr>
{{end}}</tbody>
</table>

{{if .A.GPUs}}<h2>GPUs</h2>
<p class="meta">Per hardware class, with the number of nodes in parentheses: the CC mode read from each node's GPUs, and how many GPUs its Node advertises for VMs.</p>
<table id="gpus">
<thead><tr><th>hardware class</th><th>nodes</th><th>CC mode</th><th>passthrough GPUs</th></tr></thead>
<tbody>
{{range .A.GPUs}}<tr><td>{{.Class}}</td><td>{{.Nodes}}</td><td>{{range $k, $v := .CCModes}}{{if $k}}, {{end}}{{shown $v.Value}} ({{$v.Nodes}}){{end}}</td><td>{{range $k, $v := .Passthrough}}{{if $k}}, {{end}}{{$v.Value}} ({{$v.Nodes}}){{end}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{if .A.InstallNodes}}<h2>Install status</h2>
<p class="meta">What the node-installer last did, as {{.A.InstallNodes}} of {{.A.Nodes}} nodes report it.</p>
<table id="install">
<thead><tr><th>platform</th><th>installed</th><th>not ready</th><th>failed</th><th>releases installed</th></tr></thead>
<tbody>
{{range .A.Install}}<tr><td><code>{{.Platform}}</code></td><td class="c{{if .Installed}} ready{{end}}">{{.Installed}}</td><td class="c{{if .NotReady}} warn{{end}}">{{.NotReady}}</td><td class="c{{if .Failed}} no{{end}}">{{.Failed}}</td><td>{{range $k, $r := .Releases}}{{if $k}}, {{end}}{{shown $r.Value}} on {{$r.Nodes}}{{end}}</td></tr>
{{end}}</tbody>
</table>
{{if .A.InstallFailures}}<h3>Failed installs</h3>
<ul id="failures">
{{range .Failures}}<li><b>{{.Node}}</b>: <code>{{.Platform}}</code>{{if .Release}} ({{.Release}}){{end}}: {{.Error}}</li>
{{end}}{{if .FailuresOmitted}}<li>and {{.FailuresOmitted}} more (<code>berth fleet -o json</code> lists them all)</li>
{{end}}</ul>{{end}}{{end}}

<h2>Outliers</h2>
{{if or .A.Outliers .A.Splits}}<ul>
{{range .A.Outliers}}<li><b>{{.Node}}</b> [{{.Class}}]: <code>{{.Fact}}</code> is <b>{{shown .Value}}</b>; {{.MajorityCount}} of {{.ClassSize}} nodes have {{shown .Majority}}</li>
{{end}}{{range .A.Splits}}<li>[{{.Class}}]: no majority for <code>{{.Fact}}</code>: {{range $k, $v := .Values}}{{if $k}}, {{end}}{{shown $v.Value}} on {{$v.Nodes}}{{end}}</li>
{{end}}</ul>{{else}}<p>Every hardware class is uniform.</p>{{end}}

{{if .A.Malformed}}<h2>Malformed NodeReports</h2>
<ul>{{range .A.Malformed}}<li><b>{{.Name}}</b>: {{.Reason}}</li>{{end}}</ul>{{end}}

<script>
"use strict";
(function () {
  var groups = {{.Groups}};
  var members = document.getElementById("members");
  var heads = document.querySelectorAll("th.g");
  heads.forEach(function (th) {
    th.addEventListener("click", function () {
      var g = groups[Number(th.dataset.g)];
      heads.forEach(function (h) { h.classList.remove("sel"); });
      th.classList.add("sel");
      members.textContent = "G" + (Number(th.dataset.g) + 1) + " (" + g.class + "): " + g.nodes.join(", ");
    });
  });
  var filter = document.getElementById("filter");
  filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    document.querySelectorAll("#matrix tbody tr").forEach(function (tr) {
      tr.classList.toggle("hidden", q !== "" && tr.dataset.p.indexOf(q) < 0);
    });
  });
})();
</script>
</body>
</html>
`))

// htmlGroup is what the page's script needs of a group.
type htmlGroup struct {
	Class string   `json:"class"`
	Nodes []string `json:"nodes"`
}

// WriteHTML writes the fleet view as one self-contained HTML page: the
// platform x group matrix as a heat map, the groups, the install status
// with the failed installs, and the outliers.
func WriteHTML(w io.Writer, a *Analysis, generated time.Time) error {
	gs := make([]htmlGroup, len(a.Groups))
	for i, g := range a.Groups {
		// The page lists at most 200 names per group: the JSON of a
		// 100,000-node fleet would otherwise dwarf the page.
		nodes := g.Nodes
		if len(nodes) > 200 {
			nodes = append(nodes[:200:200], fmt.Sprintf("and %d more", len(g.Nodes)-200))
		}
		gs[i] = htmlGroup{Class: g.Class, Nodes: nodes}
	}
	// At most 200 failures too, for the same reason.
	failures, omitted := a.InstallFailures, 0
	if len(failures) > 200 {
		failures, omitted = failures[:200], len(failures)-200
	}
	return htmlPage.Execute(w, struct {
		A               *Analysis
		Groups          []htmlGroup
		Failures        []InstallFailure
		FailuresOmitted int
		Generated       string
	}{a, gs, failures, omitted, generated.UTC().Format(time.RFC3339)})
}

func cellClass(v string) string {
	switch v {
	case Ready:
		return "ready"
	case ReadyWithWarnings:
		return "warn"
	case NotReady:
		return "no"
	}
	return "absent"
}
