"""The build's one addition to pyproject.toml: silence setuptools' informational editable-install notice.

`pip install -e .` maps workflows/ and activities/ (top-level folders) to rein.workflows and
rein.activities ([tool.setuptools.package-dir]), which setuptools serves with an import finder and
then prints "Editable installation ... be careful with folders ... with the same name" as a
warning. That notice is `setuptools.warnings.InformationOnly`, the class setuptools gives its
notices so they can be filtered; nothing else in the build is hidden.
"""

import warnings

from setuptools import setup
from setuptools.warnings import InformationOnly

warnings.simplefilter("ignore", InformationOnly)
setup()
