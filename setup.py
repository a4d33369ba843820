"""Metadata lives in setup.cfg; this file only adds one build step: the top-level yamls/ (which stays
where it is in the repository) is copied into the built package as openprompt_ipt/yamls, so an installed
wheel resolves ``--config quickstart.yaml`` (openprompt_ipt/config_files.py looks there after a clone's yamls/)."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithYamls(build_py):
    def run(self):
        super().run()
        source = os.path.join(HERE, "yamls")
        if not os.path.isdir(source):  # building from an sdist without yamls/ would ship no configs: say it
            raise FileNotFoundError(f"{source} not found: the wheel must carry the shipped configs")
        target = os.path.join(self.build_lib, "openprompt_ipt", "yamls")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithYamls})
