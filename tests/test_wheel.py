"""The package as anyone installs it: `python -m build` makes an sdist and a wheel holding
the templates, static files and examples, and the wheel installed in a fresh venv (not
editable, away from the source tree) runs `progresscast --version` and the demo.

Offline: the build uses this environment's setuptools (--no-isolation), and the fresh
venv sees this one's packages for the dependencies (a path line, so this environment's
own editable progresscast is not among them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib.metadata import version
from pathlib import Path

from progresscast.store.embedded import stop_embedded

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("pyproject.toml", "README.md", "src", "templates")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_wheel_installs_in_a_fresh_venv_and_plays_the_demo(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # a copy: the build writes build/ and *.egg-info beside its sources
    tree.mkdir()
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tree / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, tree / name)
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, tree, cwd=tmp_path)
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    packaged = [f for f in (ROOT / "templates").rglob("*") if f.is_file()]
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for template in packaged:
        assert f"progresscast/templates/{template.relative_to(ROOT / 'templates')}" in in_wheel, template
        assert f"src/progresscast/templates/{template.relative_to(ROOT / 'templates')}" in in_sdist, template
    assert {"progresscast/static/live.js", "progresscast/static/page.css"} <= in_wheel

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    [site] = venv.glob("lib/python*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index",
        "--quiet", wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"  # neither the source tree nor its templates/ nearby
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "PYTHON"))}
    env |= {"PROGRESSCAST_HOME": str(tmp_path / "home"), "PROGRESSCAST_TIME_SCALE": "0.1"}
    program = venv / "bin" / "progresscast"
    found = run(venv / "bin" / "python", "-c", "import progresscast; print(progresscast.__file__)", cwd=elsewhere,
                env=env)
    assert found.stdout.startswith(str(site)), found.stdout
    shown = run(program, "--version", cwd=elsewhere, env=env)
    assert shown.stdout == f"progresscast {version('progresscast')}\n"
    (elsewhere / "pc.toml").write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    try:
        demo = run(program, "demo", "--config", "pc.toml", "--delay", "0", cwd=elsewhere, env=env)
    finally:
        stop_embedded(tmp_path / "home")
    assert "Watch the card live: http://127.0.0.1:" in demo.stdout and "Demo done" in demo.stdout, demo.stdout
