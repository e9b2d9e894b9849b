# Azure: Key Vault's REST API with the instance metadata service's token for the VM's managed
# identity (no az CLI on the image; curl and python3 are).
fetch_cloud_secret() {
  local ref="$1" name tok
  case "$ref" in
    azure-kv:*)
      name="${ref#azure-kv:}"
      tok="$(curl -fsS -m 10 -H 'Metadata: true' \
        'http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net' \
        | json_field access_token)"
      curl -fsS -m 30 -H "Authorization: Bearer $tok" \
        "https://${name%%/*}.vault.azure.net/secrets/${name#*/}?api-version=7.4" \
        | json_field value ;;
    *) log "secret reference '$ref' is not an Azure Key Vault secret (azure-kv:VAULT/NAME)"
       return 1 ;;
  esac
}
