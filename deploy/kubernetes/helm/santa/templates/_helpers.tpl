{{/* Labels every object of the release carries. */}}
{{- define "santa.labels" -}}
app.kubernetes.io/name: santa
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image, as "repository:tag". */}}
{{- define "santa.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* isUnder DIR PATH: whether PATH is DIR or lies below it. */}}
{{- define "santa.isUnder" -}}
{{- $dir := clean (index . 0) -}}
{{- $path := clean (index . 1) -}}
{{- if or (eq $dir $path) (hasPrefix (printf "%s/" (trimSuffix "/" $dir)) $path) }}true{{ end -}}
{{- end -}}

{{/*
santad's configuration, checked against the mounts: a path santad uses
outside of what the DaemonSet mounts from the host would live and die with
the container (or, for the socket, be out of the workloads' reach).
*/}}
{{- define "santa.santadConfig" -}}
{{- $c := .Values.santad.config -}}
{{- $h := .Values.hostPaths -}}
{{- $socket := required "santad.config.socket must be set" $c.socket -}}
{{- $state := required "santad.config.state_dir must be set" $c.state_dir -}}
{{- $pins := required "santad.config.pin_path must be set" $c.pin_path -}}
{{- $cgroup := required "santad.config.cgroup_path must be set" $c.cgroup_path -}}
{{- if not (include "santa.isUnder" (list $h.runDir $socket)) -}}
{{- fail (printf "santad.config.socket %q is not under hostPaths.runDir %q: the node's workloads could not reach it" $socket $h.runDir) -}}
{{- end -}}
{{- if not (include "santa.isUnder" (list $h.runDir $state)) -}}
{{- fail (printf "santad.config.state_dir %q is not under hostPaths.runDir %q: the journal would vanish with the container, and a restarted santad come back without the rules" $state $h.runDir) -}}
{{- end -}}
{{- if or (not (include "santa.isUnder" (list $h.bpffs $pins))) (eq (clean $h.bpffs) (clean $pins)) -}}
{{- fail (printf "santad.config.pin_path %q is not a directory below hostPaths.bpffs %q: the pins would vanish with the container" $pins $h.bpffs) -}}
{{- end -}}
{{- if not (include "santa.isUnder" (list "/sys/fs/cgroup" $cgroup)) -}}
{{- fail (printf "santad.config.cgroup_path %q is not under /sys/fs/cgroup, where the host's cgroups are mounted into the container" $cgroup) -}}
{{- end -}}
{{- toPrettyJson $c -}}
{{- end -}}

{{/* The directory holding santad's socket, as the workloads mount it. */}}
{{- define "santa.socketDir" -}}
{{ dir .Values.santad.config.socket }}
{{- end -}}
