{{- define "hostknob.labels" -}}
app.kubernetes.io/name: hostknob
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "hostknob.selector" -}}
app.kubernetes.io/name: hostknob
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hostknob.manifestName" -}}
{{- .Values.existingManifestConfigMap | default (printf "%s-manifest" .Release.Name) }}
{{- end }}
