{{- /*
berth.fullname: the prefix of every object's name. A release named berth
(the README's `helm install berth`) gives the kustomize base's names
(berth-agent, berth-node-installer, ...). Cut to 40 characters so that the
longest suffix (-node-installer-teardown) keeps names under 63.
*/ -}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "berth.agent" -}}{{ include "berth.fullname" . }}-agent{{- end -}}
{{- define "berth.nodeInstaller" -}}{{ include "berth.fullname" . }}-node-installer{{- end -}}
{{- /*
The key of nodeInstaller.startupTaint (KEY[=VALUE]:EFFECT), the only taint
the node-installer's admission policy lets it remove; berth's own
berth.dev/runtime-not-ready when unset, as in the kustomize base.
*/ -}}
{{- define "berth.startupTaintKey" -}}
{{- $t := .Values.nodeInstaller.startupTaint | default "" -}}
{{- if $t }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(=[A-Za-z0-9_.-]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$" $t) }}
{{- fail (printf "nodeInstaller.startupTaint %q: expected KEY[=VALUE]:EFFECT, EFFECT NoSchedule, PreferNoSchedule or NoExecute" $t) }}
{{- end }}
{{- regexReplaceAll "[=:].*$" $t "" }}{{ else }}berth.dev/runtime-not-ready{{ end -}}
{{- end -}}
{{- /*
berth.startupTaints: nodeInstaller.startupTaint and the list
nodeInstaller.startupTaints (kata-deploy's startupTaints: KEY[=VALUE]:EFFECT
or a bare KEY, any effect), as a JSON list without repeats; the node-installer
gets one --startup-taint each.
*/ -}}
{{- define "berth.startupTaints" -}}
{{- $all := list -}}
{{- with .Values.nodeInstaller.startupTaint }}{{ $all = append $all . }}{{ end -}}
{{- range $i, $t := .Values.nodeInstaller.startupTaints | default list }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?((=[A-Za-z0-9_.-]*)?:(NoSchedule|PreferNoSchedule|NoExecute))?$" $t) }}
{{- fail (printf "nodeInstaller.startupTaints[%d] %q: expected KEY[=VALUE]:EFFECT or a bare KEY (any effect), EFFECT NoSchedule, PreferNoSchedule or NoExecute" $i $t) }}
{{- end }}
{{- $all = append $all $t }}
{{- end -}}
{{- toJson (uniq $all) -}}
{{- end -}}
{{- /*
berth.startupTaintKeys: the keys of berth.startupTaints, the only taints
the node-installer's admission policy lets it remove, as a JSON list;
berth's own berth.dev/runtime-not-ready when none is set.
*/ -}}
{{- define "berth.startupTaintKeys" -}}
{{- $keys := list -}}
{{- $_ := include "berth.startupTaintKey" . -}}
{{- range include "berth.startupTaints" . | fromJsonArray }}
{{- $keys = append $keys (regexReplaceAll "[=:].*$" . "") }}
{{- end -}}
{{- toJson (default (list "berth.dev/runtime-not-ready") (uniq $keys)) -}}
{{- end -}}
{{- define "berth.teardown" -}}{{ include "berth.fullname" . }}-node-installer-teardown{{- end -}}

{{- /* Labels on every object: the base's part-of plus Helm's own. */ -}}
{{- define "berth.labels" -}}
app.kubernetes.io/part-of: berth
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- /* The image reference: a digest pins it; otherwise the tag. */ -}}
{{- define "berth.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{- /*
berth.platforms: the chosen platforms' RuntimeClass rows from
files/platforms.json (generated from berth's platform model), as a YAML
list; each row gains platform (the canonical name), label (its label form,
platform.Name()) and class. Fails naming the offending value when a name is
not in the table: values.schema.json refuses it first, this is the guard
for --skip-schema-validation.
*/ -}}
{{- define "berth.platforms" -}}
{{- $table := .Files.Get "files/platforms.json" | fromJson -}}
{{- $rows := list -}}
{{- range $i, $p := include "berth.chosenPlatforms" . | fromJsonArray -}}
{{- $class := index $table.platforms $p -}}
{{- if not $class -}}
{{- fail (printf "platforms[%d]: %q is not a berth platform (canonical names as `berth platforms` prints them)" $i $p) -}}
{{- end -}}
{{- $row := deepCopy (index $table.classes $class) -}}
{{- $_ := set $row "platform" $p -}}
{{- $_ = set $row "label" ($p | replace "+" "-") -}}
{{- $_ = set $row "class" $class -}}
{{- $rows = append $rows $row -}}
{{- end -}}
{{- toYaml $rows -}}
{{- end -}}

{{- /*
berth.suffix: "-<installSuffix>", or nothing without one: appended to the
handlers, RuntimeClasses, installed labels and install-status annotation
of a side-by-side install, as berth's configure.Suffix derives them. Fails
on a bad suffix (values.schema.json refuses it first; this is the guard
for --skip-schema-validation).
*/ -}}
{{- define "berth.suffix" -}}
{{- $s := .Values.installSuffix | default "" -}}
{{- if $s -}}
{{- if or (gt (len $s) 21) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $s)) -}}
{{- fail (printf "installSuffix %q: expected a DNS label of at most 21 characters (lower-case letters, digits and '-', starting and ending with a letter or digit)" $s) -}}
{{- end -}}
-{{ $s }}
{{- end -}}
{{- end -}}

{{- /*
berth.imagePullSecrets: the pod's imagePullSecrets, from names or, as
kata-deploy's chart takes them, {name: ...} objects.
*/}}
{{- define "berth.imagePullSecrets" }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
      {{- range . }}
      - name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
      {{- end }}
      {{- end }}
{{- end }}

{{- /*
berth.podLabels and berth.podAnnotations: the operator's extra pod labels
and annotations of a component (dict "values" its values "name" its key),
never those berth's selectors and rollouts rely on (the schema refuses
them first; this is the guard for --skip-schema-validation).
*/}}
{{- define "berth.podLabels" -}}
{{- range $k, $_ := .values.podLabels }}
{{- if has $k (list "app.kubernetes.io/name" "berth.dev/install-suffix") }}
{{- fail (printf "%s.podLabels.%s: the chart sets this label itself (its DaemonSet selects on it)" $.name $k) }}
{{- end }}
{{- end }}
{{- with .values.podLabels }}{{ toYaml . }}{{ end }}
{{- end -}}
{{- define "berth.podAnnotations" -}}
{{- range $k, $_ := .values.podAnnotations }}
{{- if eq $k "berth.dev/config-checksum" }}
{{- fail (printf "%s.podAnnotations.%s: the chart sets this annotation itself (it rolls the pods when the configuration changes)" $.name $k) }}
{{- end }}
{{- end }}
{{- with .values.podAnnotations }}{{ toYaml . }}{{ end }}
{{- end -}}

{{- /* berth.quotedList: a list of strings as CEL string literals, comma-separated. */}}
{{- define "berth.quotedList" -}}
{{- $q := list -}}
{{- range . }}{{ $q = append $q (printf "'%s'" .) }}{{ end -}}
{{- join ", " $q -}}
{{- end -}}

{{- /*
berth.nodeInstallerConfig: the node-installer ConfigMap's data, as JSON:
the platforms, the manifest and, when set, the operator's containerd
drop-in (nodeInstaller.containerdUserDropIn). Its checksum on the pod
template rolls the pods when it changes; without a drop-in it is what it
always was, so that an upgrade of the chart alone rolls nothing.
*/}}
{{- define "berth.nodeInstallerConfig" -}}
{{- $ni := .Values.nodeInstaller -}}
{{- $cm := dict "platforms" (join " " (include "berth.chosenPlatforms" . | fromJsonArray)) "manifest" $ni.manifest -}}
{{- with $ni.containerdUserDropIn }}{{ $_ := set $cm "containerdUserDropIn" . }}{{ end -}}
{{- toJson $cm -}}
{{- end -}}
