{{/* The operators in install order; each has a Deployment, a ServiceAccount, RBAC and a Service. */}}
{{- define "dra-operators.names" -}}
resourceclaim devicetaint poolstatus bindingattacher taintselector devicehealth
{{- end -}}

{{/* Whether an operator runs: its own `enabled`, else what the profile says. */}}
{{- define "dra-operators.enabled" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $own := (index $root.Values.operators $name).enabled -}}
{{- if kindIs "bool" $own -}}
{{- $own -}}
{{- else if eq $root.Values.profile "managed" -}}
{{- has $name (list "poolstatus" "bindingattacher" "taintselector") -}}
{{- else -}}
true
{{- end -}}
{{- end -}}

{{/* Labels of every object (the kustomize base sets the same, with managed-by kustomize). */}}
{{- define "dra-operators.labels" -}}
app.kubernetes.io/part-of: dra-operators
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An operator's own labels, also its selector. */}}
{{- define "dra-operators.selector" -}}
app.kubernetes.io/name: dra-operators-{{ . }}
{{- end -}}

