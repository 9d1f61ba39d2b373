{{- /*
berth.chosenPlatforms: .Values.platforms as a JSON list, with, when
kata.debug is set, each platform's debug twin added (kata-deploy's
`debug: true`, which adds a kata-<shim>-debug RuntimeClass per shim): the
canonical name with +debug after the device variant (+gpu, +nvidia-cpu),
as `berth platforms` prints it. Fails when a twin is not a berth platform.
*/ -}}
{{- define "berth.chosenPlatforms" -}}
{{- $out := list -}}
{{- range .Values.platforms -}}
{{- $out = append $out . -}}
{{- end -}}
{{- if (.Values.kata | default dict).debug -}}
{{- $table := .Files.Get "files/platforms.json" | fromJson -}}
{{- range .Values.platforms -}}
{{- $twin := include "berth.debugTwin" . -}}
{{- if ne $twin . -}}
{{- if not (hasKey $table.platforms $twin) -}}
{{- fail (printf "kata.debug: platform %s has no debug variant (%s is not a berth platform)" . $twin) -}}
{{- end -}}
{{- if not (has $twin $out) -}}
{{- $out = append $out $twin -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- /*
berth.debugTwin: the canonical name of a platform's debug twin (+debug
after the device variant), or the name itself for a debug platform.
*/ -}}
{{- define "berth.debugTwin" -}}
{{- $parts := splitList "+" . -}}
{{- if has "debug" $parts -}}
{{- . -}}
{{- else -}}
{{- $head := list (first $parts) -}}
{{- $rest := rest $parts -}}
{{- if and $rest (has (first $rest) (list "gpu" "nvidia-cpu")) -}}
{{- $head = append $head (first $rest) -}}
{{- $rest = rest $rest -}}
{{- end -}}
{{- join "+" (concat $head (list "debug") $rest) -}}
{{- end -}}
{{- end -}}

{{- /*
berth.kataArgs: the node-installer's arguments for the kata: values, each
on a line of its own at the container args' indentation (nothing when kata
is unset, so that the rendering stays as before). Keys name platforms (or
custom runtimes); the node-installer refuses one it does not configure,
a drop-in key Kata's configuration does not have, a malformed proxy and an
annotation that is not Kata's.
*/ -}}
{{- define "berth.kataArgs" }}
{{- $k := .Values.kata | default dict }}
{{- $chosen := include "berth.chosenPlatforms" . | fromJsonArray }}
{{- $dropIns := $k.dropIns | default dict }}
{{- range $p := keys $dropIns | sortAlpha }}
        - {{ printf "--kata-drop-in-toml=%s=%s" $p (get $dropIns $p) | toJson }}
{{- end }}
{{- /* A debug twin the chart adds runs with its platform's proxy, as
       kata-deploy's debug runtimes get their shim's kernel_params (but
       not its user drop-in or annotations). */}}
{{- $proxy := $k.agentProxy | default dict }}
{{- range $p := keys $proxy | sortAlpha }}
{{- $for := list $p }}
{{- $twin := include "berth.debugTwin" $p }}
{{- if and $k.debug (ne $twin $p) (not (hasKey $proxy $twin)) }}
{{- $for = append $for $twin }}
{{- end }}
{{- range $q := $for }}
{{- with (get $proxy $p).httpsProxy }}
        - {{ printf "--agent-https-proxy=%s=%s" $q . | toJson }}
{{- end }}
{{- with (get $proxy $p).noProxy }}
        - {{ printf "--agent-no-proxy=%s=%s" $q . | toJson }}
{{- end }}
{{- end }}
{{- end }}
{{- $ann := $k.allowedHypervisorAnnotations | default dict }}
{{- range $p := keys $ann | sortAlpha }}
{{- with get $ann $p }}
        - {{ printf "--allow-hypervisor-annotations=%s=%s" $p (join "," .) | toJson }}
{{- end }}
{{- end }}
{{- range $i, $c := $k.customRuntimes | default list }}
{{- if not (has $c.platform $chosen) }}
{{- fail (printf "kata.customRuntimes[%d] (%s): platform %q is not one of platforms, whose binaries it runs" $i $c.name $c.platform) }}
{{- end }}
        - {{ printf "--custom-runtime=%s=%s" $c.name $c.platform | toJson }}
{{- with $c.dropIn }}
        - {{ printf "--kata-drop-in-toml=%s=%s" $c.name . | toJson }}
{{- end }}
{{- end }}
{{- end }}
