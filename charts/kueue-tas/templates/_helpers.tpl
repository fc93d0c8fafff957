{{/* The chart's name, or nameOverride. */}}
{{- define "kueue-tas.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, else the release name, followed by the chart's name
unless it already contains it (release "kueue-tas" -> "kueue-tas", as manifests/base names them). */}}
{{- define "kueue-tas.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kueue-tas.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kueue-tas.labels" -}}
app.kubernetes.io/name: {{ include "kueue-tas.name" . }}
app.kubernetes.io/part-of: kueue-tas
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ include "kueue-tas.chart" . }}
{{- end }}

{{/* The controller's pods, and what selects them. */}}
{{- define "kueue-tas.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kueue-tas.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "kueue-tas.controllerLabels" -}}
{{ include "kueue-tas.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Names of the objects the controller's settings point at. */}}
{{- define "kueue-tas.webhookService" -}}
{{- printf "%s-webhook" (include "kueue-tas.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kueue-tas.webhookSecret" -}}
{{- printf "%s-webhook-cert" (include "kueue-tas.fullname" .) }}
{{- end }}

{{/* The Secret cert-manager keeps the certificate in. */}}
{{- define "kueue-tas.certManagerSecret" -}}
{{- printf "%s-webhook-tls" (include "kueue-tas.fullname" .) }}
{{- end }}

{{- define "kueue-tas.webhookCertDir" -}}
/etc/kueue-tas-webhook
{{- end }}

{{/* /metrics and the map: cert-manager's second certificate, for the metrics Service's names. */}}
{{- define "kueue-tas.metricsService" -}}
{{- printf "%s-metrics" (include "kueue-tas.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kueue-tas.metricsCertSecret" -}}
{{- printf "%s-metrics-tls" (include "kueue-tas.fullname" .) }}
{{- end }}

{{- define "kueue-tas.servingCertDir" -}}
/etc/kueue-tas-serving
{{- end }}

{{/* The namespaces neither webhook looks into: the configured ones and the release's own. */}}
{{- define "kueue-tas.webhookNamespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ append .Values.webhook.excludedNamespaces .Release.Namespace | uniq | toJson }}
{{- end }}

{{/* config.yaml: the values under `config` in snake_case, then what names this release's objects. */}}
{{- define "kueue-tas.config" -}}
{{- if eq (int .Values.ports.metrics) (int .Values.ports.health) }}
{{- fail "ports.metrics must differ from ports.health: the kubelet probes the health port over plain HTTP without a token" }}
{{- end }}
{{- if and .Values.certManager.enabled .Values.config.servingCertDir }}
{{- fail "config.servingCertDir: leave it null with certManager.enabled (the chart mounts cert-manager's certificate)" }}
{{- end }}
{{- range $key, $value := .Values.config }}
{{- if ne $key "servingCertDir" }}
{{ $key | snakecase }}: {{ $value | toJson }}
{{- end }}
{{- end }}
{{- if .Values.certManager.enabled }}
serving_cert_dir: {{ include "kueue-tas.servingCertDir" . | quote }}
{{- else }}
serving_cert_dir: {{ .Values.config.servingCertDir | toJson }}
{{- end }}
lease_name: {{ include "kueue-tas.fullname" . | quote }}
lease_namespace: {{ .Release.Namespace | quote }}
health_bind: ":{{ .Values.ports.health }}"
metrics_bind: ":{{ .Values.ports.metrics }}"
webhook_bind: ":{{ .Values.ports.webhook }}"
{{- if .Values.certManager.enabled }}
webhook_cert_dir: {{ include "kueue-tas.webhookCertDir" . | quote }}
{{- else }}
webhook_cert_dir: null
{{- end }}
webhook_namespace: {{ .Release.Namespace | quote }}
webhook_secret: {{ include "kueue-tas.webhookSecret" . | quote }}
webhook_configuration: {{ include "kueue-tas.fullname" . | quote }}
webhook_service: {{ include "kueue-tas.webhookService" . | quote }}
{{- end }}

{{/* The map's port when config.mapBind turns it on, else nothing. */}}
{{- define "kueue-tas.mapPort" -}}
{{- $bind := toString .Values.config.mapBind | trim }}
{{- if and $bind (ne $bind "0") }}
{{- last (splitList ":" $bind) }}
{{- end }}
{{- end }}
