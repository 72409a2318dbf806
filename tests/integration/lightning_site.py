"""Builds a directory holding Lightning's real profiler modules
(profiler.py, base.py, simple.py from a pytorch-lightning wheel), so that
interpreters without torch can run Lightning's Profiler.profile generator
at its real path suffix `pytorch_lightning/profilers/profiler.py`.

The only stand-ins are the two imports those files make outside the
profilers package: lightning_fabric's get_filesystem (used only to write
report files) and typing_extensions.override (a no-op decorator).
"""
import os
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEELS = os.path.join(ROOT, ".venv", "wheels")
FILES = ("profiler.py", "base.py", "simple.py")


def wheel_for(version):
    for name in os.listdir(WHEELS):
        if name.startswith(f"pytorch_lightning-{version}-") and name.endswith(".whl"):
            return os.path.join(WHEELS, name)
    raise FileNotFoundError(f"pytorch-lightning {version} wheel missing in {WHEELS}: run `make deps`")


def build(dest, version):
    pkg = os.path.join(dest, "pytorch_lightning", "profilers")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(dest, "pytorch_lightning", "__init__.py"), "w").close()
    open(os.path.join(pkg, "__init__.py"), "w").close()
    with zipfile.ZipFile(wheel_for(version)) as z:
        for f in FILES:
            with open(os.path.join(pkg, f), "wb") as out:
                out.write(z.read(f"pytorch_lightning/profilers/{f}"))
    fab = os.path.join(dest, "lightning_fabric", "utilities")
    os.makedirs(fab, exist_ok=True)
    open(os.path.join(dest, "lightning_fabric", "__init__.py"), "w").close()
    open(os.path.join(fab, "__init__.py"), "w").close()
    with open(os.path.join(fab, "cloud_io.py"), "w") as f:
        f.write("def get_filesystem(path, **kwargs):\n    raise RuntimeError('not available in this test site')\n")
    with open(os.path.join(dest, "typing_extensions.py"), "w") as f:
        f.write("def override(f):\n    return f\n")
    return dest
