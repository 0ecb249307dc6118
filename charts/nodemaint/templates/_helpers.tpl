{{/* The name of the chart. */}}
{{- define "nodemaint.name" -}}
{{- default "nodemaint-controller" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the controller's objects: nodemaint-controller, as in config/ (one install per
cluster: the CRDs and the ClusterRole are cluster-scoped).
*/}}
{{- define "nodemaint.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- include "nodemaint.name" . }}
{{- end }}
{{- end }}

{{- define "nodemaint.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nodemaint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodemaint.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nodemaint.labels" -}}
helm.sh/chart: {{ include "nodemaint.chart" . }}
{{ include "nodemaint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: nodemaint
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "nodemaint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodemaint.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nodemaint.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The prefix of the admission policies' names: nodemaint by default (as in config/admission), else
the full name without a trailing -controller.
*/}}
{{- define "nodemaint.policyPrefix" -}}
{{- include "nodemaint.fullname" . | trimSuffix "-controller" }}
{{- end }}

{{/*
The controller's PriorityClass: priorityClassName, else the chart's own (priorityClass.create).
*/}}
{{- define "nodemaint.priorityClassName" -}}
{{- if .Values.priorityClassName }}
{{- .Values.priorityClassName }}
{{- else if .Values.priorityClass.create }}
{{- include "nodemaint.fullname" . }}
{{- end }}
{{- end }}

{{/*
The Secret of the metrics server's certificate: metrics.certSecret, else cert-manager's
(metrics.certManager); empty: the controller makes a self-signed one.
*/}}
{{- define "nodemaint.metricsCertSecret" -}}
{{- if .Values.metrics.certSecret }}
{{- .Values.metrics.certSecret }}
{{- else if .Values.metrics.certManager.enabled }}
{{- include "nodemaint.fullname" . }}-metrics-tls
{{- end }}
{{- end }}
