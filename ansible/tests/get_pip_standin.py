"""Stand-in for get-pip.py, ansible-test's pip bootstrap, where
ci-files.testing.ansible.com cannot be reached (CI reaches package indexes
only). ansible-test runs ~/.ansible/test/cache/get_pip_<version>.py in a
new virtual environment with pip-install arguments (`pip==24.2 ...`,
`--no-setuptools`, `--no-wheel`): ensurepip installs the pip bundled with
this Python, and that pip installs the requested packages from the index.
ansible/tests/run.sh puts it there."""

import subprocess
import sys

# get-pip.py's own options, not pip's.
ARGS = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
if ARGS:
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + ARGS)
