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
