"""Build hook: the wheel carries the repository's data folders inside the package.

``queries/`` (the views and examples), ``migrations/``, ``configs/``, ``alembic.ini`` and
``requirements.txt`` live at the top of the repository (the layout the project keeps); a
wheel copies them to ``ragrouter/_data/``, where :mod:`ragrouter.paths` finds them when the
package runs outside a clone. Metadata is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA = ["queries", "migrations", "configs", "alembic.ini", "requirements.txt"]


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "ragrouter" / "_data"
        shutil.rmtree(target, ignore_errors=True)  # no file of an earlier build lingers
        for name in DATA:
            src = HERE / name
            if src.is_dir():
                shutil.copytree(src, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif src.exists():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / name)


setup(cmdclass={"build_py": BuildPyWithData})
