#!/usr/bin/env bash
# The collection's static checks: ansible-lint on the collection and
# playbooks, and ansible-test sanity (ansible-doc, validate-modules,
# yamllint, pylint, ...) on its own copy, since ansible-test writes
# tests/output inside the collection. Neither needs hostknob built. .ci/run runs it in the background
# while hostknob compiles; ansible/tests/run.sh runs it unless
# HOSTKNOB_SANITY=0 says it ran already.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
tests="$repo/ansible/tests"
coll=ansible/ansible_collections/hostknob/hostknob
python=$(command -v python3)
work=$(mktemp -d -p "$(dist/fast-tmp)")
trap 'rm -rf "$work"' EXIT
echo "== ansible-test sanity on the collection (every run: ansible-doc, validate-modules, yamllint, ...)"
s=$SECONDS
# ansible-test bootstraps pip in each venv with get-pip.py from
# ci-files.testing.ansible.com, which CI cannot reach (package indexes only):
# where that host does not answer, a stand-in in its cache runs ensurepip and
# pip installs the rest from the index (ansible/tests/get_pip_standin.py).
pip_version=$("$python" -c 'import re, ansible_test, os
p = os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")
print(re.search(r"pip=.([0-9.]+).", open(p).read()).group(1))')
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -s "$cache" ] && ! curl -fsS -m 10 -o /dev/null "https://ci-files.testing.ansible.com/ansible-test/get-pip-$pip_version.py" 2>/dev/null; then
  mkdir -p "$(dirname "$cache")"
  cp "$tests/get_pip_standin.py" "$cache"
  echo "ci-files.testing.ansible.com unreachable: $cache runs ensurepip"
fi
# Its own copy: ansible-test writes tests/output inside the collection.
mkdir -p "$work/ansible_collections/hostknob"
cp -r "$coll" "$work/ansible_collections/hostknob/hostknob"
rm -rf "$work/ansible_collections/hostknob/hostknob/tests/output"
(cd "$work/ansible_collections/hostknob/hostknob" && git init -q . && git add -A \
  && ansible-test sanity --python "$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')")
echo "ansible-test sanity: $((SECONDS - s)) s"

echo "== ansible-lint on the collection and playbooks"
s=$SECONDS
(cd ansible && ANSIBLE_COLLECTIONS_PATH="$repo/ansible" ansible-lint --offline -q ansible_collections/hostknob/hostknob playbooks tests/*.yml)
echo "ansible-lint: $((SECONDS - s)) s"
