{{/* Names. */}}
{{- define "leoflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "leoflow.fullname" -}}
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

{{- define "leoflow.apiName" -}}
{{- printf "%s-api" (include "leoflow.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- /* The Host names the api answers to (LEOFLOW_API_ALLOWED_HOSTS; loopback is always
allowed, for kubectl port-forward): every in-cluster name of its Service, plus
api.allowedHosts (an Ingress host). Probes and scrapes address the pod by IP: the
api exempts /healthz, /readyz and /metrics from the Host check. */ -}}
{{- define "leoflow.apiAllowedHosts" -}}
{{- $name := include "leoflow.apiName" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.%s" $name $ns .Values.clusterDomain) }}
{{- join "," (concat $hosts .Values.api.allowedHosts) }}
{{- end }}

{{- define "leoflow.schedulerName" -}}
{{- printf "%s-scheduler" (include "leoflow.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Service task pods dial; every scheduler replica serves it. */}}
{{- define "leoflow.agentServiceName" -}}
{{- printf "%s-scheduler-agent" (include "leoflow.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "leoflow.agentEndpoint" -}}
{{- printf "%s.%s.svc.%s:%d" (include "leoflow.agentServiceName" .) .Release.Namespace .Values.clusterDomain (int .Values.scheduler.agentPort) }}
{{- end }}

{{- define "leoflow.postgresName" -}}
{{- printf "%s-postgresql" (include "leoflow.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Where task pods run: taskNamespace when set, else the release namespace. */}}
{{- define "leoflow.taskNamespace" -}}
{{- default .Release.Namespace .Values.taskNamespace }}
{{- end }}

{{/* The Lease the scheduler replicas elect a leader with; the Role names it. */}}
{{- define "leoflow.leaseName" -}}
{{- default (include "leoflow.schedulerName" .) .Values.scheduler.leaderElection.leaseName }}
{{- end }}

{{/* ServiceAccounts: the scheduler's is the only one bound to a Role. */}}
{{- define "leoflow.schedulerServiceAccountName" -}}
{{- include "leoflow.schedulerName" . }}
{{- end }}

{{- define "leoflow.apiServiceAccountName" -}}
{{- if .Values.split.enabled }}
{{- include "leoflow.apiName" . }}
{{- else }}
{{- include "leoflow.schedulerServiceAccountName" . }}
{{- end }}
{{- end }}

{{/* Labels. */}}
{{- define "leoflow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "leoflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: leoflow
{{- end }}

{{- define "leoflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leoflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "leoflow.componentLabels" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{ include "leoflow.labels" $ctx }}
app.kubernetes.io/component: {{ $component }}
{{- end }}

{{- define "leoflow.componentSelectorLabels" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{ include "leoflow.selectorLabels" $ctx }}
app.kubernetes.io/component: {{ $component }}
{{- end }}

{{/* Task pods carry this label (set by the executor's pod builder). */}}
{{- define "leoflow.taskPodSelectorLabels" -}}
app.kubernetes.io/managed-by: leoflow
{{- end }}

{{- define "leoflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "leoflow.taskImage" -}}
{{- default (include "leoflow.image" .) .Values.taskImage }}
{{- end }}

{{/* The fields a DAG may set on its task pods once the operator allows them. */}}
{{- define "leoflow.passthroughFields" -}}
tolerations,node_selector,service_account,priority_class_name,affinity,topology_spread_constraints,ephemeral_storage,termination_grace_period_seconds,resource_claims
{{- end }}

{{- define "leoflow.taskPodPassthrough" -}}
{{- $allowed := splitList "," (include "leoflow.passthroughFields" .) }}
{{- range .Values.taskPodPassthrough }}
{{- if not (has . $allowed) }}
{{- fail (printf "taskPodPassthrough: unknown field %q; allowed: %s" . (join ", " $allowed)) }}
{{- end }}
{{- end }}
{{- join "," .Values.taskPodPassthrough }}
{{- end }}

{{/* Secret holding LEOFLOW_DATABASE_URL. */}}
{{- define "leoflow.databaseSecretName" -}}
{{- if .Values.database.embedded.enabled }}
{{- include "leoflow.postgresName" . }}
{{- else }}
{{- required "database.existingSecret is required (a Secret holding the PostgreSQL URL), or enable database.embedded" .Values.database.existingSecret }}
{{- end }}
{{- end }}

{{- define "leoflow.databaseSecretKey" -}}
{{- if .Values.database.embedded.enabled }}url{{ else }}{{ .Values.database.secretKey }}{{ end }}
{{- end }}

{{- define "leoflow.tokenSigningKeySecretName" -}}
{{- default (printf "%s-token-signing-key" (include "leoflow.fullname" .)) .Values.tokenSigningKey.existingSecret }}
{{- end }}

{{/* Pod Security `restricted`: shared by every control-plane container. */}}
{{- define "leoflow.podSecurityContext" -}}
runAsNonRoot: true
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "leoflow.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The Secret with the agent endpoint's certificate and key (tls.crt, tls.key). */}}
{{- define "leoflow.agentTLSSecretName" -}}
{{- default (printf "%s-agent-tls" (include "leoflow.fullname" .)) .Values.agentTLS.existingSecret }}
{{- end }}

{{/* The ConfigMap in the task namespace with the CA bundle (ca.crt) task pods trust. */}}
{{- define "leoflow.agentCAConfigMapName" -}}
{{- if .Values.agentTLS.existingCAConfigMap }}
{{- .Values.agentTLS.existingCAConfigMap }}
{{- else if or (not .Values.agentTLS.existingSecret) .Values.agentTLS.caBundle }}
{{- printf "%s-agent-ca" (include "leoflow.fullname" .) }}
{{- else }}
{{- fail "agentTLS.existingSecret is set: give the CA that signed it in agentTLS.caBundle (PEM) or agentTLS.existingCAConfigMap (a ConfigMap with key ca.crt in the task namespace)" }}
{{- end }}
{{- end }}
