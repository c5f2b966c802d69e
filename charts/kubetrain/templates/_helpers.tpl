{{/* kubetrain chart helpers. */}}

{{- define "kubetrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-kubetrain, or the release name when it already says kubetrain. */}}
{{- define "kubetrain.fullname" -}}
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

{{- define "kubetrain.operatorName" -}}
{{- printf "%s-operator" (include "kubetrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubetrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubetrain.operatorName" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubetrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubetrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "kubetrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubetrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubetrain
{{- end }}

{{/* The admission webhook's objects: labelled component webhook, so that the
metrics ServiceMonitor (component operator) does not select its Service. */}}
{{- define "kubetrain.webhookLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kubetrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubetrain
{{- end }}

{{- define "kubetrain.webhookServiceName" -}}
{{- printf "%s-webhook" (include "kubetrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubetrain.webhookConfigName" -}}
{{- printf "%s-validating-webhook" (include "kubetrain.fullname" .) }}
{{- end }}

{{- define "kubetrain.webhookSecretName" -}}
{{- printf "%s-webhook-cert" (include "kubetrain.fullname" .) }}
{{- end }}

{{/* "true" when the operator keeps the webhook's certificate itself (the
Secret, the caBundle): the webhook on and no existingCertSecret. */}}
{{- define "kubetrain.webhookSelfManaged" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.existingCertSecret) }}true{{ end }}
{{- end }}

{{/* Where the operator mounts webhook.existingCertSecret (--webhook-cert-dir). */}}
{{- define "kubetrain.webhookCertDir" -}}
/etc/kubetrain/webhook-tls
{{- end }}

{{- define "kubetrain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "kubetrain.runtimeImage" -}}
{{- printf "%s:%s" .Values.runtimeImage.repository (default .Chart.AppVersion .Values.runtimeImage.tag) }}
{{- end }}

{{- define "kubetrain.leaderElectionNamespace" -}}
{{- default .Release.Namespace .Values.operator.leaderElection.namespace }}
{{- end }}

{{/* The operator's own namespace, as it resolves it (operator_options.cc
ResolveLeaderElectionNamespace): --leader-election-namespace, which the chart
passes with leader election on, else its service account's, the release
namespace. The webhook's Secret lives there. */}}
{{- define "kubetrain.operatorNamespace" -}}
{{- if .Values.operator.leaderElection.enabled }}
{{- include "kubetrain.leaderElectionNamespace" . }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The operator's permissions, least privilege: exactly the API calls
kubetrain-operator makes (tests/packaging/rbac.test.mjs derives them from the
.cc files under operator/ and fails on a missing or an unused verb). Informers
list and watch; objects are read from their caches, so no get.
trainingjobs/finalizers update is the one permission no call shows: the
objects it creates carry ownerReferences with blockOwnerDeletion, which the
OwnerReferencesPermissionEnforcement admission plugin checks. Secrets: create
only (the job's token Secret is never read back). Volcano PodGroups only with
gangScheduler volcano: the operator touches them only then. get on
TrainingJobs only with the webhook: it reads the job a Scale belongs to.
*/}}
{{- define "kubetrain.rules" -}}
- apiGroups: [kubetrain.io]
  resources: [trainingjobs]
  {{- if .Values.webhook.enabled }}
  verbs: [get, list, watch, delete]
  {{- else }}
  verbs: [list, watch, delete]
  {{- end }}
- apiGroups: [kubetrain.io]
  resources: [trainingjobs/status]
  verbs: [update, patch]
- apiGroups: [kubetrain.io]
  resources: [trainingjobs/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [list, watch, create, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if not .Values.watchNamespace }}
{{- /* Cluster-scoped: a namespaced install runs with --watch-nodes=auto, off. */}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]
{{- end }}
{{- if eq .Values.operator.gangScheduler "volcano" }}
- apiGroups: [scheduling.volcano.sh]
  resources: [podgroups]
  verbs: [list, watch, create, delete]
{{- end }}
{{- end }}

{{/*
The webhook's self-managed certificate (operator/webhook/webhook_certs.cc), in
the operator's own namespace: its one Secret read and updated by name, and
created (RBAC cannot limit create by name: the object has none yet).
*/}}
{{- define "kubetrain.webhookSecretRules" -}}
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [{{ include "kubetrain.webhookSecretName" . }}]
  verbs: [get, update]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
{{- end }}

{{/* ... and the caBundle of its one ValidatingWebhookConfiguration. */}}
{{- define "kubetrain.webhookConfigRules" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ include "kubetrain.webhookConfigName" . }}]
  verbs: [get, update]
{{- end }}

{{/* Leader election: the Lease only (operator/kube/leader_elector.cc). */}}
{{- define "kubetrain.leaderElectionRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end }}
