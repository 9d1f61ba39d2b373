{{- /*
The node-installer's pod spec, indented for a DaemonSet's or a Job's pod
template: the DaemonSet's pod stays up with /readyz; job mode's per-node
Jobs (job: true) run it --run-once and end.
*/}}
{{- define "berth.nodeInstallerPodSpec" }}
{{- $ := .root }}
{{- $job := .job }}
{{- $runOnce := "--run-once" }}
{{- $ni := $.Values.nodeInstaller }}
      {{- if $job }}
      restartPolicy: Never
      {{- end }}
      serviceAccountName: {{ include "berth.nodeInstaller" $ }}
      automountServiceAccountToken: true
      {{- with $ni.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $ni.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $ni.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $ni.tolerations }}
      tolerations:
        {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- include "berth.imagePullSecrets" $ }}
      enableServiceLinks: false
      {{- if $.Values.hostNetwork }}
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      terminationGracePeriodSeconds: 120
      securityContext:
        runAsUser: 0
        runAsGroup: 0
        runAsNonRoot: false
      containers:
      - name: node-installer
        image: {{ include "berth.image" $ }}
        imagePullPolicy: {{ $.Values.image.pullPolicy }}
        {{- /* A failed run's last log line (a cleanup refused while Kata
        pods run, naming them) becomes the container's termination message,
        which the uninstall hook reports. */}}
        terminationMessagePolicy: FallbackToLogsOnError
        args:
        - node-installer
        - --root=/host
        - --live
        - --platform=$(BERTH_PLATFORMS)
        - --manifest=$(BERTH_MANIFEST)
        {{- if $job }}
        - {{ $runOnce }}
        {{- else }}
        - --health-addr=:{{ $ni.healthPort }}
        {{- end }}
        - --restart-lease=$(POD_NAMESPACE)/{{ include "berth.nodeInstaller" $ }}-restart
        {{- if include "berth.suffix" $ }}
        - --install-suffix={{ $.Values.installSuffix }}
        {{- end }}
        {{- with $ni.mirror }}
        - --mirror={{ . }}
        {{- end }}
        {{- range $ni.from }}
        - --from={{ . }}
        {{- end }}
        {{- with $ni.prefix }}
        - --prefix={{ . }}
        {{- end }}
        {{- with $ni.kataConfigDir }}
        - --kata-config-dir={{ . }}
        {{- end }}
        {{- with $ni.containerdConfig }}
        - --containerd-config={{ . }}
        {{- end }}
        {{- with $ni.crioConfig }}
        - --crio-config={{ . }}
        {{- end }}
        {{- with $ni.runtimeUnit }}
        - --runtime-unit={{ . }}
        {{- end }}
        {{- with $ni.runtimeSocket }}
        - --runtime-socket={{ . }}
        {{- end }}
        {{- with $ni.systemdSocket }}
        - --systemd-socket={{ . }}
        {{- end }}
        {{- if $ni.kataDeployLabels }}
        - --kata-deploy-labels
        {{- end }}
        {{- if $ni.advertiseTEEKeys }}
        - --advertise-tee-keys
        {{- end }}
        {{- if $ni.forceRemove }}
        - --force-remove
        {{- end }}
        {{- range include "berth.startupTaints" $ | fromJsonArray }}
        - {{ printf "--startup-taint=%s" . | quote }}
        {{- end }}
        {{- if $ni.containerdUserDropIn }}
        - --containerd-drop-in=/etc/berth-drop-in/containerd.toml
        {{- end }}
        {{- if gt (int $ni.maxConcurrentRestarts) 1 }}
        - --max-concurrent-restarts={{ int $ni.maxConcurrentRestarts }}
        {{- end }}
        {{- include "berth.kataArgs" $ }}
        {{- range $ni.extraArgs }}
        - {{ . | quote }}
        {{- end }}
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: BERTH_NODE_INSTALLER_MODE
          value: install
        - name: BERTH_PLATFORMS
          valueFrom:
            configMapKeyRef:
              name: {{ include "berth.nodeInstaller" $ }}
              key: platforms
        - name: BERTH_MANIFEST
          valueFrom:
            configMapKeyRef:
              name: {{ include "berth.nodeInstaller" $ }}
              key: manifest
        {{- with $.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- if not $job }}
        ports:
        - name: health
          containerPort: {{ $ni.healthPort }}
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: health
          periodSeconds: 5
          failureThreshold: 3
        {{- end }}
        resources:
          {{- toYaml $ni.resources | nindent 10 }}
        securityContext:
          privileged: true
          readOnlyRootFilesystem: true
        volumeMounts:
        - name: host
          mountPath: /host
          mountPropagation: HostToContainer
        - name: tmp
          mountPath: /tmp
        {{- if $ni.containerdUserDropIn }}
        - name: containerd-drop-in
          mountPath: /etc/berth-drop-in
          readOnly: true
        {{- end }}
        {{- with $ni.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      volumes:
      - name: host
        hostPath:
          path: /
          type: Directory
      - name: tmp
        emptyDir:
          sizeLimit: 64Mi
      {{- if $ni.containerdUserDropIn }}
      {{- /* The operator's containerd drop-in, from the ConfigMap whose
             checksum rolls the pods when it changes. */}}
      - name: containerd-drop-in
        configMap:
          name: {{ include "berth.nodeInstaller" $ }}
          items:
          - key: containerdUserDropIn
            path: containerd.toml
      {{- end }}
      {{- with $ni.extraVolumes }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end }}

{{- /* The per-node Job of job mode, as the dispatcher reads it. */}}
{{- define "berth.nodeInstallerJob" -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "berth.nodeInstaller" . }}
  labels:
    {{- include "berth.labels" . | nindent 4 }}
    app.kubernetes.io/name: berth-node-installer
spec:
  # A failed run is retried twice on the node, then reported; a rerun of
  # the dispatcher (helm upgrade) tries again.
  backoffLimit: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/name: berth-node-installer
        {{- with .Values.installSuffix }}
        berth.dev/install-suffix: {{ . }}
        {{- end }}
        {{- with include "berth.podLabels" (dict "values" .Values.nodeInstaller "name" "nodeInstaller") }}{{ . | nindent 8 }}{{ end }}
      annotations:
        # The platforms and manifest (from the ConfigMap the pod reads):
        # a change makes another configuration, whose Jobs replace these.
        berth.dev/config-checksum: {{ include "berth.nodeInstallerConfig" . | fromJson | toJson | sha256sum }}
        {{- with include "berth.podAnnotations" (dict "values" .Values.nodeInstaller "name" "nodeInstaller") }}{{ . | nindent 8 }}{{ end }}
    spec:
      {{- include "berth.nodeInstallerPodSpec" (dict "root" . "job" true) }}
{{- end }}

{{- /* The pod-level settings of the dispatcher and of the teardown hook:
       unprivileged pods that only talk to the API server. */}}
{{- define "berth.dispatcherPod" }}
      {{- with .Values.nodeInstaller.tolerations }}
      tolerations:
        {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- include "berth.imagePullSecrets" . }}
      enableServiceLinks: false
      {{- if .Values.hostNetwork }}
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
{{- end }}

{{- /* The dispatcher's container after its args: the node selector, the
       template's mount and an unprivileged container. */}}
{{- define "berth.dispatcherContainer" }}
        {{- with .Values.nodeInstaller.nodeSelector }}
        - --node-selector={{ range $i, $k := keys . | sortAlpha }}{{ if $i }},{{ end }}{{ $k }}={{ get $.Values.nodeInstaller.nodeSelector $k }}{{ end }}
        {{- end }}
        {{- with .Values.extraEnv }}
        env:
        {{- toYaml . | nindent 8 }}
        {{- end }}
        volumeMounts:
        - name: job
          mountPath: /etc/berth
          readOnly: true
        resources:
          requests:
            cpu: 10m
            memory: 32Mi
          limits:
            cpu: 200m
            memory: 128Mi
        securityContext:
          privileged: false
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: ["ALL"]
{{- end }}
