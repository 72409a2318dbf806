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


# wheel name -> (package path of the profilers, package path of fabric)
LAYOUTS = {
    "pytorch_lightning": ("pytorch_lightning/profilers", "lightning_fabric/utilities"),
    "lightning": ("lightning/pytorch/profilers", "lightning/fabric/utilities"),
}


def wheel_for(version, wheel="pytorch_lightning"):
    for name in os.listdir(WHEELS):
        if name.startswith(f"{wheel}-{version}-") and name.endswith(".whl"):
            return os.path.join(WHEELS, name)
    raise FileNotFoundError(f"{wheel} {version} wheel missing in {WHEELS}: run `make deps`")


def package_dirs(dest, rel):
    """Creates dest/rel with an empty __init__.py in every level."""
    path = dest
    for part in rel.split("/"):
        path = os.path.join(path, part)
        os.makedirs(path, exist_ok=True)
        open(os.path.join(path, "__init__.py"), "a").close()
    return path


def build(dest, version, wheel="pytorch_lightning"):
    """Returns the site directory; the profilers import as
    `pytorch_lightning.profilers` or `lightning.pytorch.profilers`."""
    prof_rel, fab_rel = LAYOUTS[wheel]
    pkg = package_dirs(dest, prof_rel)
    with zipfile.ZipFile(wheel_for(version, wheel)) as z:
        for f in FILES:
            with open(os.path.join(pkg, f), "wb") as out:
                out.write(z.read(f"{prof_rel}/{f}"))
    fab = package_dirs(dest, fab_rel)
    with open(os.path.join(fab, "cloud_io.py"), "w") as f:
        f.write("def get_filesystem(path, **kwargs):\n    raise RuntimeError('not available in this test site')\n")
    with open(os.path.join(dest, "typing_extensions.py"), "w") as f:
        f.write("def override(f):\n    return f\n")
    return dest
