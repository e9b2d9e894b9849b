# GCP: Secret Manager's REST API with the metadata server's token for the instance's own
# service account (no gcloud on the image; curl and python3 are).
fetch_cloud_secret() {
  local ref="$1" name tok project
  case "$ref" in
    gcp-secret:*)
      name="${ref#gcp-secret:}"
      tok="$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' \
        http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token \
        | json_field access_token)"
      project="$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' \
        http://metadata.google.internal/computeMetadata/v1/project/project-id)"
      curl -fsS -m 30 -H "Authorization: Bearer $tok" \
        "https://secretmanager.googleapis.com/v1/projects/$project/secrets/$name/versions/latest:access" \
        | json_field payload.data | base64 -d ;;
    *) log "secret reference '$ref' is not a GCP secret (gcp-secret:NAME)"; return 1 ;;
  esac
}
