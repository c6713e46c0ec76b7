"""Only what pyproject.toml cannot say: build_py also writes harness/_build_info.py (the source commit).

The commit comes from $GIT_COMMIT (the Dockerfile's build argument) or `git rev-parse HEAD`.
"""

import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


def source_commit() -> str:
    commit = os.environ.get("GIT_COMMIT", "").strip()
    if commit and commit != "unknown":
        return commit
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


class BuildPyWithCommit(build_py):  # type: ignore[misc]  # setuptools ships no types here
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "harness" / "_build_info.py"
        target.write_text(f'"""Written at build time by setup.py."""\n\nCOMMIT = {source_commit()!r}\n')


setup(cmdclass={"build_py": BuildPyWithCommit})
