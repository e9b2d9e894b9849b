import os
import shutil
import sys

bin_dir = os.path.join(sys.prefix, "bin")
for name in ("pip", "pip3"):
    shutil.copy("/usr/local/lib/advisor-standins/pip", os.path.join(bin_dir, name))
    os.chmod(os.path.join(bin_dir, name), 0o755)
