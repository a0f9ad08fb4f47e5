#!/usr/bin/env bash
# Check the chart's Roles against the apiserver calls Leoflow makes, both ways:
# every call in leoflow/kube/calls.py granted, every granted verb used by a call.
# Exit 0 when they match; 1 naming each call without a grant and each grant without a call.
#
# Renders helm/leoflow twice (defaults: tasks in the release namespace; and a separate
# task namespace with every toggle on), so both layouts are checked. Also verifies that
# helm/leoflow/files/executor-calls.yaml, the file the Roles are rendered from, is current.
#
# Needs: helm ($LEOFLOW_HELM, else .tools/bin/helm — see scripts/install-helm.sh, else
# helm on PATH) and a Python with leoflow importable and PyYAML ($PYTHON, else .venv).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"

helm="${LEOFLOW_HELM:-}"
if [[ -z "${helm}" ]]; then
    if [[ -x .tools/bin/helm ]]; then helm=.tools/bin/helm
    elif command -v helm >/dev/null; then helm="$(command -v helm)"
    else
        echo "rbac-covers-executor.sh: helm not found; run scripts/install-helm.sh" >&2
        exit 2
    fi
fi
python="${PYTHON:-}"
if [[ -z "${python}" ]]; then
    if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

"${python}" -m leoflow.kube.calls > "${work}/calls.txt"
"${python}" scripts/rbac_cover.py generate --calls "${work}/calls.txt" --check

release_ns=leoflow-system
status=0
check() { # name task-namespace helm-args...
    local name="$1" task_ns="$2"
    shift 2
    "${helm}" template leoflow helm/leoflow --namespace "${release_ns}" "$@" > "${work}/${name}.yaml"
    echo "rbac-covers-executor: ${name}"
    "${python}" scripts/rbac_cover.py check --calls "${work}/calls.txt" \
        --manifests "${work}/${name}.yaml" \
        --task-namespace "${task_ns}" --release-namespace "${release_ns}" || status=1
}

check defaults "${release_ns}"
check split-task-namespace leoflow-tasks \
    --set split.enabled=true --set taskNamespace=leoflow-tasks \
    --set networkPolicy.enabled=true --set taskNetworkPolicy.enabled=true \
    --set database.embedded.enabled=true

exit "${status}"
